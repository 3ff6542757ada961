//! The `solidq` command line. `src/bin/solidq.rs` only calls [`main`].

use clap::{Parser, Subcommand};

use crate::Queue;

/// Exit code for an operational error (database unreachable, migration
/// failed).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code for a usage error (bad arguments); clap uses it too.
pub const EXIT_USAGE: i32 = 2;

#[derive(Parser)]
#[command(
    name = "solidq",
    version,
    about = "Durable background jobs on SQLite or PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create or update solidq's tables (running it twice changes nothing).
    Migrate {
        /// postgres://…, sqlite://path or a file path.
        #[arg(long, env = "SOLIDQ_DATABASE_URL")]
        database_url: String,
    },
}

/// Parses the command line, runs the command, and returns the exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match run(cli.command) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("solidq: {error}");
            EXIT_FAILURE
        }
    }
}

fn run(command: Command) -> crate::Result<()> {
    match command {
        Command::Migrate { database_url } => {
            let queue = Queue::connect(&database_url)?;
            let applied = queue.migrate()?;
            if applied.is_empty() {
                println!("{}: up to date", queue.url());
            } else {
                println!("{}: applied {}", queue.url(), applied.join(", "));
            }
            Ok(())
        }
    }
}
