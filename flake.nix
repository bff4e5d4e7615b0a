# Hangar with Nix (doc/packaging.md):
#   nix build                       the hangar binary (nix/package.nix)
#   nixosModules.default            services.hangar (nix/module.nix)
# No flake.lock is committed: nixpkgs cannot be fetched where this was
# written, so the first `nix build` or `nix flake lock` makes one.
{
  description = "Hangar, an S3-compatible object store cluster";

  # Hangar needs Rust 1.92 or newer (edition 2024).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forEachSystem = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in
    {
      packages = forEachSystem (pkgs: {
        hangar = pkgs.callPackage ./nix/package.nix { };
        default = self.packages.${pkgs.stdenv.hostPlatform.system}.hangar;
      });

      overlays.default = final: _prev: {
        hangar = final.callPackage ./nix/package.nix { };
      };

      nixosModules.default =
        { pkgs, lib, ... }:
        {
          imports = [ ./nix/module.nix ];
          services.hangar.package = lib.mkDefault self.packages.${pkgs.stdenv.hostPlatform.system}.hangar;
        };
    };
}
