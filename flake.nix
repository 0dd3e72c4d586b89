{
  description = "codewhale: a terminal coding agent whose heart is a sandbox-first execution host";

  # nixpkgs is the only input: one pinned tree to fetch, and the whole flake
  # can be evaluated offline against a stand-in nixpkgs (ci/check-flake).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;

      systems = [
        "x86_64-linux"
        "aarch64-linux"
        "x86_64-darwin"
        "aarch64-darwin"
      ];
      forAllSystems = f: lib.genAttrs systems (system: f system nixpkgs.legacyPackages.${system});

      cargoToml = builtins.fromTOML (builtins.readFile ./Cargo.toml);

      # Everything git tracks except the Nix/CI plumbing, so editing the
      # flake or the CI scripts does not rebuild (and re-test) the crate.
      src = lib.fileset.toSource {
        root = ./.;
        fileset = lib.fileset.difference ./. (
          lib.fileset.unions [
            ./flake.nix
            ./flake.lock
            (lib.fileset.maybeMissing ./ci)
          ]
        );
      };

      # Arguments shared by the package and the clippy check, so clippy sees
      # exactly the dependencies and native inputs of the real build.
      commonArgs = pkgs: {
        inherit src;
        inherit (cargoToml.package) version;
        cargoLock.lockFile = ./Cargo.lock;
        # TLS: rustls (ring, built by stdenv's C compiler) with the system
        # roots on Linux, so no OpenSSL; native-tls on macOS
        # (Security.framework, part of the default Darwin SDK).
        nativeBuildInputs = [
          pkgs.pkg-config
          pkgs.makeWrapper
        ];
        buildInputs = [ ];
      };

      mkPackage =
        pkgs:
        let
          isLinux = pkgs.stdenv.hostPlatform.isLinux;
          git = lib.getExe' pkgs.git "git";
          bwrap = lib.getExe' pkgs.bubblewrap "bwrap";
          # Runtime tools are APPENDED to PATH: a tool the system already
          # provides wins. For bwrap that is deliberate (see docs/INSTALL.md,
          # "Which bwrap"): Ubuntu's AppArmor profile that lets bwrap create
          # user namespaces is attached to /usr/bin/bwrap, and a store path
          # is never covered by it. For git it keeps the user's own git in
          # the commands the agent runs; codewhale's snapshots use
          # CODEWHALE_GIT by absolute path instead.
          runtimePath = [ pkgs.git ] ++ lib.optionals isLinux [ pkgs.bubblewrap ];
          wrapArgs = [
            "--suffix PATH : ${lib.makeBinPath runtimePath}"
            "--set CODEWHALE_GIT ${git}"
          ]
          # Let `codewhale doctor` say which bwrap it used and why: the
          # bundled one's path and the precedence rule this package applies.
          ++ lib.optionals isLinux [
            "--set CODEWHALE_NIX_BWRAP ${bwrap}"
            "--set CODEWHALE_BWRAP_ORDER system-first"
          ];
        in
        pkgs.rustPlatform.buildRustPackage (
          commonArgs pkgs
          // {
            pname = "codewhale";

            # The ONLY test skip switch: inside the Nix build sandbox the
            # tests/real_*.rs binaries (bwrap, landlock, seatbelt) cannot
            # create namespaces or nest sandbox-exec, so they compile to
            # nothing there. Every other test runs. The shipped binary is
            # built without the feature (it only gates tests).
            checkFeatures = [ "nix-build-sandbox" ];
            # Snapshot tests drive a real git.
            nativeCheckInputs = [ pkgs.git ];
            # Host tests bind 127.0.0.1; the macOS Nix sandbox denies that
            # unless asked.
            __darwinAllowLocalNetworking = true;

            postInstall = ''
              wrapProgram $out/bin/codewhale ${builtins.concatStringsSep " " wrapArgs}
            '';

            meta = {
              description = cargoToml.package.description;
              homepage = cargoToml.package.repository;
              license = lib.licenses.asl20;
              mainProgram = "codewhale";
              platforms = lib.platforms.linux ++ lib.platforms.darwin;
            };
          }
        );
    in
    {
      packages = forAllSystems (
        system: pkgs: {
          default = mkPackage pkgs;
          codewhale = self.packages.${system}.default;
        }
      );

      apps = forAllSystems (
        system: pkgs: {
          default = {
            type = "app";
            program = lib.getExe self.packages.${system}.default;
            meta.description = "Run codewhale (try: nix run . -- doctor)";
          };
        }
      );

      devShells = forAllSystems (
        system: pkgs: {
          default = pkgs.mkShell {
            # The native inputs exactly as in the package build (not
            # inputsFrom, which would also pull the cargo build hooks in).
            inherit (commonArgs pkgs) nativeBuildInputs buildInputs;
            packages = [
              pkgs.cargo
              pkgs.rustc
              pkgs.clippy
              pkgs.rustfmt
              pkgs.rust-analyzer
              pkgs.cargo-nextest
              pkgs.git
            ]
            ++ lib.optionals pkgs.stdenv.hostPlatform.isLinux [ pkgs.bubblewrap ];
          };
        }
      );

      checks = forAllSystems (
        system: pkgs: {
          # The package build runs `cargo test --features nix-build-sandbox`.
          package = self.packages.${system}.default;

          clippy = pkgs.rustPlatform.buildRustPackage (
            commonArgs pkgs
            // {
              pname = "codewhale-clippy";
              nativeBuildInputs = (commonArgs pkgs).nativeBuildInputs ++ [ pkgs.clippy ];
              buildPhase = ''
                runHook preBuild
                cargo clippy --offline --all-targets -- -D warnings
                cargo clippy --offline --all-targets --features nix-build-sandbox -- -D warnings
                runHook postBuild
              '';
              installPhase = "mkdir -p $out";
              doCheck = false;
              # cargo-auditable only wraps `cargo build`; clippy needs none.
              auditable = false;
            }
          );

          fmt = pkgs.runCommand "codewhale-fmt" {
            nativeBuildInputs = [
              pkgs.cargo
              pkgs.rustc
              pkgs.rustfmt
            ];
          } "cd ${src} && HOME=$TMPDIR cargo fmt --all --check && touch $out";
        }
      );

      formatter = forAllSystems (system: pkgs: pkgs.nixfmt-tree);
    };
}
