# `hangar` from this checkout, built with nixpkgs' Rust tooling. A
# callPackage function: `pkgs.callPackage ./nix/package.nix { }`; the flake
# at the root and nix/default.nix call it. doc/packaging.md says what was
# and was not built.
#
# The crates come from Cargo.lock (cargoLock.lockFile: each one is fetched
# by the checksum the lock file holds), so there is no cargoHash to keep in
# step with it; the lock file has no git sources, so no outputHashes.
{
  lib,
  rustPlatform,
}:

let
  manifest = builtins.fromTOML (builtins.readFile ../Cargo.toml);
in
rustPlatform.buildRustPackage {
  pname = "hangar";
  inherit (manifest.workspace.package) version;

  # What cargo reads: the workspace manifest and lock file and every member
  # crate (the workspace lists k2v-style-tests/* among its members).
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../Cargo.toml
      ../Cargo.lock
      ../src
      ../k2v-style-tests/sdk
    ];
  };
  cargoLock.lockFile = ../Cargo.lock;

  cargoBuildFlags = [
    "-p"
    "hangar"
  ];
  # The workspace's tests start real nodes and S3 clients (script/test);
  # the package runs none of them.
  doCheck = false;

  meta = {
    description = "S3-compatible object store cluster (server and operator CLI)";
    license = lib.licenses.agpl3Only;
    mainProgram = "hangar";
    platforms = lib.platforms.linux;
  };
}
