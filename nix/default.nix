# Without flakes: `nix-build nix` builds hangar with the nixpkgs of the
# NIX_PATH (`<nixpkgs>`), or with the one given: `nix-build nix --arg pkgs
# 'import /path/to/nixpkgs { }'`.
{
  pkgs ? import <nixpkgs> { },
}:

pkgs.callPackage ./package.nix { }
