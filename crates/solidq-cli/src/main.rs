//! The `solidq` command-line tool; see `solidq --help`.

fn main() {
    std::process::exit(solidq_cli::main());
}
