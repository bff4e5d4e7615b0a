# NixOS module: services.hangar runs one Hangar node (doc/packaging.md).
#
#   services.hangar = {
#     enable = true;
#     rpcSecretFile = "/run/keys/hangar-rpc-secret";   # 64 hex characters
#     settings = {
#       replication_factor = 3;
#       rpc_public_addr = "10.0.0.1:3901";
#       bootstrap_peers = [ "<node id>@10.0.0.2:3901" ];
#     };
#   };
#
# `settings` is hangar.toml as Nix (doc/configuration.md), written to
# /etc/hangar.toml, where the `hangar` CLI looks by default. The unit runs
# as a dynamic, unprivileged user with its state in /var/lib/hangar
# (StateDirectory). Secrets stay out of the Nix store: the files named by
# rpcSecretFile, adminTokenFile and metricsTokenFile are handed to the unit
# as systemd credentials, and the config points at those copies.
{
  config,
  lib,
  pkgs,
  ...
}:

let
  cfg = config.services.hangar;
  toml = pkgs.formats.toml { };
  credentials = "/run/credentials/hangar.service";
  secretFiles = lib.filterAttrs (_: file: file != null) {
    rpc_secret = cfg.rpcSecretFile;
    admin_token = cfg.adminTokenFile;
    metrics_token = cfg.metricsTokenFile;
  };
  settings = lib.recursiveUpdate cfg.settings (
    {
      rpc_secret_file = "${credentials}/rpc_secret";
    }
    // lib.optionalAttrs (cfg.adminTokenFile != null || cfg.metricsTokenFile != null) {
      admin =
        lib.optionalAttrs (cfg.adminTokenFile != null) {
          admin_token_file = "${credentials}/admin_token";
        }
        // lib.optionalAttrs (cfg.metricsTokenFile != null) {
          metrics_token_file = "${credentials}/metrics_token";
        };
    }
  );
  # TOML has no null: an option set to null is left out of the file.
  configFile = toml.generate "hangar.toml" (lib.filterAttrsRecursive (_: v: v != null) settings);
  dataPaths =
    if builtins.isList cfg.settings.data_dir then
      map (d: d.path) cfg.settings.data_dir
    else
      [ cfg.settings.data_dir ];
  secretOption =
    what:
    lib.mkOption {
      type = lib.types.nullOr lib.types.str;
      default = null;
      example = "/run/keys/hangar-${what}";
      description = ''
        File holding the ${what}, read by systemd and handed to the unit as a
        credential; it is never copied into the Nix store.
      '';
    };
in
{
  options.services.hangar = {
    enable = lib.mkEnableOption "Hangar, an S3-compatible object store node";

    package = lib.mkOption {
      type = lib.types.package;
      default = pkgs.callPackage ./package.nix { };
      defaultText = lib.literalExpression "pkgs.callPackage ./nix/package.nix { }";
      description = "The hangar package (server and CLI).";
    };

    rpcSecretFile = lib.mkOption {
      type = lib.types.str;
      example = "/run/keys/hangar-rpc-secret";
      description = ''
        File holding the cluster's rpc_secret (64 hex characters, the same
        on every node), read by systemd and handed to the unit as a
        credential; it is never copied into the Nix store.
      '';
    };
    adminTokenFile = secretOption "admin token";
    metricsTokenFile = secretOption "metrics token";

    logLevel = lib.mkOption {
      type = lib.types.str;
      default = "info";
      example = "info,hangar_net=debug";
      description = "RUST_LOG of the unit.";
    };

    settings = lib.mkOption {
      description = "hangar.toml as Nix; every key: doc/configuration.md.";
      default = { };
      type = lib.types.submodule {
        freeformType = toml.type;
        options = {
          metadata_dir = lib.mkOption {
            type = lib.types.str;
            default = "/var/lib/hangar/meta";
            description = "Metadata store and the CLI's admin socket.";
          };
          data_dir = lib.mkOption {
            type = with lib.types; either str (listOf (attrsOf toml.type));
            default = "/var/lib/hangar/data";
            description = "Block files: a path, or a list of { path, capacity } / { path, read_only }.";
          };
          replication_factor = lib.mkOption {
            type = lib.types.ints.positive;
            default = 1;
            description = "Copies of each partition; the same on every node.";
          };
          rpc_bind_addr = lib.mkOption {
            type = lib.types.str;
            default = "[::]:3901";
            description = "RPC (QUIC, UDP) listen address.";
          };
          s3_api = {
            api_bind_addr = lib.mkOption {
              type = lib.types.str;
              default = "[::]:3900";
              description = "S3 endpoint.";
            };
            s3_region = lib.mkOption {
              type = lib.types.str;
              default = "garage";
              description = "Region of SigV4 scopes.";
            };
          };
          admin.api_bind_addr = lib.mkOption {
            type = lib.types.nullOr lib.types.str;
            default = "127.0.0.1:3903";
            description = "/health and /metrics (`hangar health` asks here); null: off.";
          };
        };
      };
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      {
        assertion = !(cfg.settings ? rpc_secret) && !(cfg.settings ? rpc_secret_file);
        message = "services.hangar: give the secret with rpcSecretFile, not in settings (it would land in the Nix store)";
      }
    ];

    environment.systemPackages = [ cfg.package ];
    environment.etc."hangar.toml".source = configFile;

    systemd.services.hangar = {
      description = "Hangar object store node";
      wantedBy = [ "multi-user.target" ];
      wants = [ "network-online.target" ];
      after = [ "network-online.target" ];
      restartTriggers = [ configFile ];
      environment.RUST_LOG = cfg.logLevel;
      environment.NO_COLOR = "1";
      serviceConfig = {
        ExecStart = "${lib.getExe cfg.package} -c /etc/hangar.toml server";
        DynamicUser = true;
        StateDirectory = [
          "hangar"
          "hangar/meta"
          "hangar/data"
        ];
        StateDirectoryMode = "0700";
        # Directories set elsewhere than the state directory ("-": may not exist yet).
        ReadWritePaths = map (p: "-${p}") ([ cfg.settings.metadata_dir ] ++ dataPaths);
        LoadCredential = lib.mapAttrsToList (name: file: "${name}:${file}") secretFiles;
        Restart = "on-failure";
        RestartSec = 2;
        TimeoutStopSec = 60;
        LimitNOFILE = 65536;
        NoNewPrivileges = true;
        PrivateTmp = true;
        PrivateDevices = true;
        ProtectSystem = "strict";
        ProtectHome = true;
        ProtectKernelTunables = true;
        ProtectKernelModules = true;
        ProtectControlGroups = true;
        RestrictAddressFamilies = [
          "AF_INET"
          "AF_INET6"
          "AF_UNIX"
        ];
        RestrictNamespaces = true;
        LockPersonality = true;
        MemoryDenyWriteExecute = true;
        SystemCallArchitectures = "native";
      };
    };
  };
}
