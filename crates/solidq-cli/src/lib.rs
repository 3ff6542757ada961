//! The `solidq` command line. `src/main.rs` only calls [`main`].
//!
//! Operator commands (and `migrate`) find the database in `--database-url`,
//! else `SOLIDQ_DATABASE_URL`, else the `database_url` of `--config`
//! (default `solidq.toml` when that file exists); both flags go before or
//! after the command. Only `migrate` creates an SQLite file. Queues, kinds
//! and failed job ids that the database does not know of are refused
//! (exit 1) unless `--force`. Listings print a table sized to the
//! terminal, or with `--json` one JSON document (its shape is in the
//! README's CLI section and stays stable).
//!
//! Exit codes, one rule for every command: 0 done (a listing printed, the
//! schema current, an action that changed at least one job, queue or
//! task); 1 nothing matched or refused (an action that changed nothing, an
//! unknown name or id, a unique key taken, the database unreachable); 2
//! bad usage (bad arguments or configuration; nothing was written). Every
//! error is one line on stderr; a database password never appears in
//! output or logs. Every command that changes state records an entry in
//! the audit log (source `cli`, actor `$USER@hostname`) after its action;
//! an entry that cannot be written is a warning on stderr, not a failure.

mod audit;
mod check;
mod control;
mod guard;
mod jobs;
mod ops;
mod output;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use output::Output;
use solidq::config::{ENV_DATABASE_URL, SupervisorConfig};
use solidq::{DatabaseUrl, Error, JobStatus, Queue, QueueConfig, Supervisor};

/// Exit code for a command that did nothing: nothing matched, or it was
/// refused (database unreachable, migration failed, job not found, an
/// unknown name, an action that changed nothing).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code for a usage error (bad arguments or configuration); clap uses
/// it too.
pub const EXIT_USAGE: i32 = 2;

#[derive(Parser)]
#[command(
    name = "solidq",
    version,
    about = "Durable background jobs on SQLite, PostgreSQL or MySQL"
)]
struct Cli {
    #[command(flatten)]
    db: Db,
    #[command(subcommand)]
    command: Command,
}

/// Where a command finds the database: flags taken before or after the
/// command (`solidq --database-url X queues`, `solidq queues
/// --database-url X`).
#[derive(Args, Clone, Default)]
struct Db {
    /// postgres://…, sqlite://path or a file path (not for `supervisor`
    /// and `check`, which read the configuration file's).
    #[arg(long, global = true, env = ENV_DATABASE_URL, hide_env_values = true)]
    database_url: Option<String>,
    /// A solidq.toml: the file `supervisor` and `check` read (default
    /// ./solidq.toml), and where other commands take `database_url` from
    /// (default ./solidq.toml when it exists).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
}

/// How a command prints.
#[derive(Args, Clone, Copy)]
struct Format {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Create or update solidq's tables (running it twice changes nothing);
    /// the only command that creates an SQLite file.
    Migrate,
    /// Serve the web dashboard, the HTTP API and Prometheus metrics until
    /// SIGTERM or SIGINT (credentials from `[web]` of the configuration or
    /// SOLIDQ_WEB_*; without any, loopback only).
    Web {
        /// host:port to listen on (default: `bind` of `[web]`, else
        /// 127.0.0.1:8080).
        #[arg(long)]
        bind: Option<String>,
        /// A Host name to answer besides the listening address (and
        /// localhost on loopback), such as the name a reverse proxy
        /// forwards: `jobs.example.com`, `jobs.example.com:8443`,
        /// `.example.com` (it and its subdomains), `*.example.com` (its
        /// subdomains). Repeat it for more; replaces `allowed_hosts` of
        /// `[web]` and SOLIDQ_WEB_ALLOWED_HOSTS.
        #[arg(long = "allowed-host", value_name = "HOST")]
        allowed_hosts: Vec<String>,
        /// Read X-Forwarded-Host (behind a proxy that rewrites Host and sets
        /// it): its names must be allowed too, and POSTs' Origin is
        /// compared with it (default: `trust_forwarded_host` of `[web]`,
        /// else off).
        #[arg(long)]
        trust_forwarded_host: bool,
    },
    /// Run the worker processes of a configuration file (`--config`,
    /// default solidq.toml), the dispatcher, the scheduler and the pruner,
    /// until SIGTERM or SIGINT.
    Supervisor,
    /// Validate a configuration file (`--config`, default solidq.toml),
    /// the database and the worker programs without starting anything.
    Check {
        /// Accept recurring kinds and queues no registered worker serves,
        /// and worker queues no job was ever on (printed as warnings).
        #[arg(long)]
        force: bool,
    },
    /// Enqueue a job by kind, with JSON arguments.
    Enqueue(jobs::EnqueueArgs),
    /// Every queue: its jobs counted by status (ready, scheduled, retrying,
    /// claimed, running, blocked, failed), latency, paused.
    Queues {
        #[command(flatten)]
        format: Format,
    },
    /// Stop workers claiming from a queue (enqueueing goes on).
    Pause {
        /// The queue.
        queue: String,
        /// Go ahead even if no job, worker or recurring task names the queue.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        format: Format,
    },
    /// Let workers claim from a paused queue again.
    Resume {
        /// The queue.
        queue: String,
        /// Go ahead even if no job, worker or recurring task names the queue.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        format: Format,
    },
    /// List jobs, newest first; `jobs cancel|run-now` with filters acts on
    /// all of them.
    Jobs(jobs::JobsArgs),
    /// Everything about one job: status, attempts, times, progress,
    /// result, every error with its backtrace; `job cancel|run-now ID…`.
    Job(jobs::JobArgs),
    /// One batch: its members counted (pending, succeeded, failed), when
    /// it was closed and finished, the callbacks enqueued.
    Batch {
        /// The batch's id.
        id: i64,
        #[command(flatten)]
        format: Format,
    },
    /// Retry or discard failed jobs, in batches.
    Failed {
        #[command(subcommand)]
        action: jobs::FailedAction,
    },
    /// Registered processes, their heartbeats and the jobs they hold.
    Processes {
        #[command(flatten)]
        format: Format,
    },
    /// Recurring tasks with their next and last runs; `recurring run KEY`
    /// enqueues one now.
    Recurring(ops::RecurringArgs),
    /// Delete finished jobs whose keep_result ended, or with --older-than,
    /// every finished job that finished longer ago than that.
    ClearFinished {
        /// e.g. "7d", "12h".
        #[arg(long, value_parser = humantime::parse_duration)]
        older_than: Option<std::time::Duration>,
        #[command(flatten)]
        format: Format,
    },
}

/// A job status on the command line, spelled as [`JobStatus::as_str`].
fn status_parser() -> impl clap::builder::TypedValueParser<Value = JobStatus> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(JobStatus::ALL.map(JobStatus::as_str)).map(|s| {
        *JobStatus::ALL
            .iter()
            .find(|status| status.as_str() == s)
            .expect("one of the possible values")
    })
}

/// Parses the command line, runs the command, and returns the exit code.
pub fn main() -> i32 {
    use clap::{CommandFactory, FromArgMatches, parser::ValueSource};
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return usage_failure(error),
    };
    let level = match cli.command {
        Command::Supervisor | Command::Migrate | Command::Check { .. } => "info",
        Command::Web { .. } => "info",
        _ => "warn",
    };
    let _ = solidq::logging::try_init(level);
    // The supervisor and check read the database of their file: a URL on
    // the command line would be ignored, so it is refused (the
    // environment's, shared with operator commands, is not).
    let given_url = matches.value_source("database_url") == Some(ValueSource::CommandLine);
    if given_url && matches!(cli.command, Command::Supervisor | Command::Check { .. }) {
        let error = Error::InvalidOption {
            option: "--database-url",
            value: cli
                .db
                .database_url
                .as_deref()
                .map(|u| DatabaseUrl::parse(u).map_or_else(|_| "…".into(), |u| u.redacted()))
                .unwrap_or_default(),
            reason:
                "supervisor and check take the database_url of their configuration file (--config)"
                    .into(),
        };
        eprintln!("solidq: {}", one_line(&error.to_string()));
        return EXIT_USAGE;
    }
    match run(cli.command, &cli.db) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("solidq: {}", one_line(&error.to_string()));
            exit_code(&error)
        }
    }
}

/// `--help` and `--version` print as clap prints them; anything else clap
/// refuses becomes one line and exit code 2.
fn usage_failure(error: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                EXIT_USAGE
            } else {
                0
            }
        }
        _ => {
            let text = error.render().to_string();
            let parts: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"))
                .map(|l| l.trim_start_matches("error: "))
                .collect();
            let mut line = String::new();
            for part in parts {
                if !line.is_empty() {
                    line.push_str(if line.ends_with(':') { " " } else { "; " });
                }
                line.push_str(part);
            }
            eprintln!("solidq: {}", one_line(&line));
            EXIT_USAGE
        }
    }
}

/// `text` on one line, whatever its source printed.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Bad input (a URL, a configuration, an argument) is a usage error; the
/// rest (nothing matched, refused, unreachable) is 1.
fn exit_code(error: &Error) -> i32 {
    match error {
        Error::Config { .. }
        | Error::InvalidDatabaseUrl { .. }
        | Error::BackendNotCompiled { .. }
        | Error::InvalidOption { .. }
        | Error::SchemaBehind { .. }
        | Error::TooLarge { .. }
        | Error::Schedule { .. } => EXIT_USAGE,
        _ => EXIT_FAILURE,
    }
}

impl Db {
    /// The database URL the arguments name, with the client settings of
    /// the configuration file they came from (if any).
    fn resolve(&self) -> solidq::Result<(String, QueueConfig)> {
        let mut config = QueueConfig {
            pool_size: 2,
            ..QueueConfig::from_env()?
        };
        let url = match (&self.database_url, &self.config) {
            (Some(url), _) if !url.trim().is_empty() => url.clone(),
            (_, Some(path)) => from_config(path, &mut config)?,
            _ => {
                let default = PathBuf::from("solidq.toml");
                if default.exists() {
                    from_config(&default, &mut config)?
                } else {
                    return Err(Error::Config {
                        origin: "command line".into(),
                        message: format!(
                            "no database: give --database-url, set {ENV_DATABASE_URL}, or --config solidq.toml"
                        ),
                    });
                }
            }
        };
        Ok((url, config))
    }

    /// Connects to the existing database the arguments name, and checks it
    /// is migrated.
    fn queue(&self) -> solidq::Result<Queue> {
        self.queue_with_pool(None)
    }

    /// As [`Db::queue`], with `pool_size` connections instead of the
    /// configuration's.
    fn queue_with_pool(&self, pool_size: Option<u32>) -> solidq::Result<Queue> {
        let (url, mut config) = self.resolve()?;
        if let Some(size) = pool_size {
            config.pool_size = size;
        }
        require_existing(&DatabaseUrl::parse(&url)?)?;
        let queue = Queue::connect_with(&url, config)?;
        queue.check_schema()?;
        Ok(queue)
    }
}

/// Refuses an SQLite URL whose file does not exist: only `migrate` creates
/// a database, so a mistyped path is not mistaken for a new, empty one.
fn require_existing(url: &DatabaseUrl) -> solidq::Result<()> {
    match url.sqlite_path() {
        Some(path) if !path.exists() => Err(Error::Connect {
            url: url.redacted(),
            source: format!(
                "no such database file {} (only `solidq migrate` creates one)",
                path.display()
            )
            .into(),
        }),
        _ => Ok(()),
    }
}

/// The database URL of the configuration file at `path`; its settings
/// that a client uses go into `queue`.
fn from_config(path: &std::path::Path, queue: &mut QueueConfig) -> solidq::Result<String> {
    let config = SupervisorConfig::load(path)?;
    queue.sqlite_synchronous = config.sqlite_synchronous;
    queue.max_payload_bytes = config.max_payload_bytes;
    Ok(config.database_url()?.expose().to_string())
}

/// The flags of `solidq web` besides the database.
struct WebFlags {
    bind: Option<String>,
    allowed_hosts: Vec<String>,
    trust_forwarded_host: bool,
}

/// `solidq web`: the `[web]` settings of the configuration file the
/// database came from (or of ./solidq.toml), overridden by the
/// environment and the flags.
fn web(db: &Db, flags: WebFlags) -> solidq::Result<()> {
    let WebFlags {
        bind,
        allowed_hosts,
        trust_forwarded_host,
    } = flags;
    use solidq::config::{DEFAULT_WEB_BIND, WebSection};
    let path = db.config.clone().or_else(|| {
        let default = PathBuf::from("solidq.toml");
        default.exists().then_some(default)
    });
    let section = match &path {
        Some(path) => SupervisorConfig::load(path)?.web,
        None => WebSection::default(),
    };
    let mut config = solidq_web::WebConfig::from_section(&section)?;
    if !allowed_hosts.is_empty() {
        config.allowed_hosts = solidq_web::AllowedHost::parse_list(
            allowed_hosts.iter().map(String::as_str),
            "--allowed-host",
        )?;
    }
    config.trust_forwarded_host |= trust_forwarded_host;
    let bind = bind
        .or(section.bind.clone())
        .unwrap_or_else(|| DEFAULT_WEB_BIND.to_string());
    let address = std::net::ToSocketAddrs::to_socket_addrs(&bind)
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Error::InvalidOption {
            option: "--bind",
            value: bind.clone(),
            reason: "expected host:port, such as 127.0.0.1:8080".into(),
        })?;
    // Requests run side by side: more than the CLI's two connections.
    let queue = db.queue_with_pool(Some(8))?;
    solidq_web::serve(queue, config, address)
}

/// The configuration file of `supervisor` and `check`.
fn config_file(db: &Db) -> PathBuf {
    db.config
        .clone()
        .unwrap_or_else(|| PathBuf::from("solidq.toml"))
}

fn run(command: Command, db: &Db) -> solidq::Result<()> {
    match command {
        Command::Migrate => {
            let (url, config) = db.resolve()?;
            let queue = Queue::connect_with(&url, config)?;
            let applied = queue.migrate()?;
            if applied.is_empty() {
                println!("{}: up to date", queue.url());
            } else {
                println!("{}: applied {}", queue.url(), applied.join(", "));
            }
            Ok(())
        }
        Command::Supervisor => {
            let config = SupervisorConfig::load(&config_file(db))?;
            require_existing(&config.database_url()?)?;
            Supervisor::new(config).run()
        }
        Command::Check { force } => check::check(&config_file(db), force),
        Command::Web {
            bind,
            allowed_hosts,
            trust_forwarded_host,
        } => web(
            db,
            WebFlags {
                bind,
                allowed_hosts,
                trust_forwarded_host,
            },
        ),
        Command::Enqueue(args) => jobs::enqueue(args, db),
        Command::Queues { format } => ops::queues(&db.queue()?, out(format)),
        Command::Pause {
            queue,
            force,
            format,
        } => ops::pause(&db.queue()?, &queue, true, force, out(format)),
        Command::Resume {
            queue,
            force,
            format,
        } => ops::pause(&db.queue()?, &queue, false, force, out(format)),
        Command::Jobs(args) => jobs::list(args, db),
        Command::Job(args) => jobs::show(args, db),
        Command::Batch { id, format } => jobs::batch(&db.queue()?, id, out(format)),
        Command::Failed { action } => jobs::failed(action, db),
        Command::Processes { format } => ops::processes(&db.queue()?, out(format)),
        Command::Recurring(args) => ops::recurring(args, db),
        Command::ClearFinished { older_than, format } => {
            let queue = db.queue()?;
            let deleted = queue.clear_finished(older_than)?;
            let target = audit::filter(&[(
                "older_than",
                older_than.map(|d| humantime::format_duration(d).to_string().into()),
            )]);
            audit::record(&queue, "clear_finished", &target, deleted);
            let document = serde_json::json!({ "deleted": deleted });
            if deleted == 0 {
                return out(format).nothing_done(
                    document,
                    "delete",
                    match older_than {
                        Some(age) => format!(
                            "no finished job finished more than {} ago",
                            humantime::format_duration(age)
                        ),
                        None => "no finished job is past its keep_result".into(),
                    },
                );
            }
            out(format).say(document, &format!("deleted {deleted} finished jobs"));
            Ok(())
        }
    }
}

/// `--limit`: a whole number, at least 1.
fn at_least_one(text: &str) -> std::result::Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{text:?} is not a whole number of at least 1")),
    }
}

fn out(format: Format) -> Output {
    Output { json: format.json }
}
