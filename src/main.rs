//! The CLI edge: parse, dispatch, map errors to exit codes.

fn main() {
    let code = codewhale::cli::main();
    std::process::exit(code);
}
