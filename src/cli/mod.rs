//! The `solidq` command line. `src/bin/solidq.rs` only calls [`main`].

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::SupervisorConfig;
use crate::{Error, Queue, Supervisor};

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
    /// Run the worker processes of a configuration file, the dispatcher and
    /// the pruner, until SIGTERM or SIGINT.
    Supervisor {
        /// The configuration file.
        #[arg(long, default_value = "solidq.toml")]
        config: PathBuf,
    },
    /// Validate a configuration file, the database and the worker programs
    /// without starting anything.
    Check {
        /// The configuration file.
        #[arg(long, default_value = "solidq.toml")]
        config: PathBuf,
    },
}

/// Parses the command line, runs the command, and returns the exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match run(cli.command) {
        Ok(()) => 0,
        Err(error) => {
            // One line, whatever the error's source printed.
            let message = error
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            eprintln!("solidq: {message}");
            exit_code(&error)
        }
    }
}

/// Bad input (a URL, a configuration) is a usage error; the rest is
/// operational.
fn exit_code(error: &Error) -> i32 {
    match error {
        Error::Config { .. } | Error::InvalidDatabaseUrl { .. } | Error::InvalidOption { .. } => {
            EXIT_USAGE
        }
        _ => EXIT_FAILURE,
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
        Command::Supervisor { config } => Supervisor::new(SupervisorConfig::load(&config)?).run(),
        Command::Check { config } => {
            let report = Supervisor::new(SupervisorConfig::load(&config)?).check()?;
            for warning in &report.warnings {
                println!("warning: {warning}");
            }
            println!(
                "{}: ok ({} worker processes, database {})",
                config.display(),
                report.processes,
                report.database
            );
            Ok(())
        }
    }
}
