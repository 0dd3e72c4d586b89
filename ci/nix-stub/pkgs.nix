# Fake package set (codewhale's extended copy of ../shared/tools/nix-offline-stub:
# adds nixfmt/nixfmt-tree, bubblewrap's bin/bwrap, and buildRustPackage's cargo*Features and *Inputs
# derivation attributes). Every "package" is a real but trivial derivation built
# with the host's /bin/sh, so `nix build`/`nix run` work offline with
# sandbox = false. Add attributes here when a flake needs more.
{ system ? builtins.currentSystem, overlays ? [ ], ... }:
let
  lib = import ./lib.nix;
  isLinux = builtins.match ".*-linux" system != null;
  isDarwin = builtins.match ".*-darwin" system != null;
  sh = name: script: extra: builtins.derivation ({
    inherit name system;
    builder = "/bin/sh";
    args = [ "-c" script ];
    PATH = "/usr/bin:/bin";
  } // extra);
  # A fake package: $out/bin/<name> that only echoes.
  # Executables whose name differs from the package's (as in nixpkgs).
  exeNames = { bubblewrap = "bwrap"; };
  fake = name: let exe = exeNames.${name} or name; in sh name ''
    mkdir -p $out/bin
    printf '#!/bin/sh\necho "fake ${exe} $*"\n' > $out/bin/${exe}
    chmod +x $out/bin/${exe}
  '' { } // { pname = name; meta.mainProgram = exe; };
  # nixpkgs marks these Linux-only; referencing them on darwin is an error.
  linuxOnly = name: if isLinux then fake name
    else throw "${name} is Linux-only in nixpkgs (meta.platforms); guard it with stdenv.isLinux";
  # Minimal wrapProgram: --prefix/--suffix VAR SEP VAL and --set VAR VAL.
  wrapFn = ''
    wrapProgram() {
      p=$1; shift; w="$(dirname "$p")/.$(basename "$p")-wrapped"; mv "$p" "$w"
      { echo '#!/bin/sh'
        while [ $# -gt 0 ]; do case "$1" in
          --prefix) echo "export $2=\"$4\''${$2:+$3\$$2}\""; shift 4;;
          --suffix) echo "export $2=\"\''${$2:+\$$2$3}$4\""; shift 4;;
          --set) echo "export $2=\"$3\""; shift 3;;
          *) echo "stub wrapProgram: ignoring $1" >&2; shift;;
        esac; done
        echo "exec \"$w\" \"\$@\""; } > "$p"; chmod +x "$p"; }
  '';
  buildRustPackage = a0:
    let a = if builtins.isFunction a0 then a0 a else a0; in
    assert a ? pname && a ? version && a ? src;
    assert (a ? cargoLock || a ? cargoHash || a ? cargoVendorDir)
      || throw "buildRustPackage: need cargoLock.lockFile, cargoHash or cargoVendorDir";
    assert (a ? cargoLock) -> (builtins.pathExists a.cargoLock.lockFile
      || throw "cargoLock.lockFile ${toString a.cargoLock.lockFile} does not exist (untracked in git?)");
    let
      main = a.meta.mainProgram or a.pname;
      drv = sh "${a.pname}-${a.version}" ''
        test -f "$src/Cargo.toml" || { echo "src has no Cargo.toml" >&2; exit 1; }
        mkdir -p $out/bin
        printf '#!/bin/sh\necho "stub ${main} $*"\necho "PATH=$PATH"\n' > $out/bin/${main}
        chmod +x $out/bin/${main}
        ${wrapFn}
        eval "$postInstall"
        eval "$postFixup"
      '' ({
        inherit (a) src;
        postInstall = a.postInstall or "";
        postFixup = a.postFixup or "";
        # As in nixpkgs' buildRustPackage: features and inputs become
        # derivation attributes (ci/check-flake asserts on them).
        cargoBuildFeatures = a.buildFeatures or [ ];
        cargoCheckFeatures = a.checkFeatures or (a.buildFeatures or [ ]);
        nativeBuildInputs = a.nativeBuildInputs or [ ];
        buildInputs = a.buildInputs or [ ];
        nativeCheckInputs = a.nativeCheckInputs or [ ];
      } // lib.optionalAttrs (a ? cargoLock) { lockFile = a.cargoLock.lockFile; });
    in drv // {
      inherit (a) pname version;
      meta = a.meta or { };
      passthru = a.passthru or { };
      doCheck = a.doCheck or true;
      checkFlags = a.checkFlags or [ ];
    };
  mkDerivation = a: sh (a.name or "${a.pname}-${a.version}") "mkdir -p $out" { } // { meta = a.meta or { }; };
  base = (lib.genAttrs [ "bubblewrap" "libseccomp" "libcap" ] linuxOnly)
    // (lib.genAttrs [
      "git" "gitMinimal" "cargo" "rustc" "clippy" "rustfmt" "rust-analyzer"
      "cargo-nextest" "pkg-config" "openssl" "makeWrapper" "makeBinaryWrapper"
      "installShellFiles" "versionCheckHook" "ripgrep" "nixfmt-rfc-style"
      "nixfmt" "nixfmt-tree"
    ] fake)
    // {
      inherit lib system;
      stdenv = {
        inherit isLinux isDarwin mkDerivation;
        hostPlatform = { inherit system isLinux isDarwin; };
        buildPlatform = { inherit system isLinux isDarwin; };
      };
      rustPlatform = { inherit buildRustPackage; };
      mkShell = a: sh "nix-shell" "mkdir -p $out" { } // { packages = a.packages or [ ]; };
      runCommand = name: env: script: sh name "mkdir -p $out; ${script}" { };
      writeShellScriptBin = name: text: fake name;
    };
in
# Overlays get the current set as both final and prev (good enough here).
builtins.foldl' (acc: ov: acc // ov acc acc) base overlays
