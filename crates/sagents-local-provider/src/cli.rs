//! Command line of `sagents-local-provider`; every flag is also a `SAGENTS_PROVIDER_*`
//! variable, and flags win.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use super::cgroup::{Defaults, MAX_PROCESSES, MIN_MEMORY_MB};
use super::isolation::BadUidRange;
use super::{Config, IsolationMode, UidRange};

const FAULT_HELP: &str = "\
Test only: inject faults. SPEC is RULE(;RULE)*, RULE is POINT=ACTION(:MODIFIER)*.
POINT: capabilities, provision, inspect, attach, release, restore, exec, list_sandboxes,
       list_checkpoints, delete_checkpoint,
       snapshot (the archive step, after the pause), resume (after a failed snapshot),
       state_save (the next save of a sandbox's state), kill (the kill after an archive),
       create_intent, create_files, create_leader, create_state, create_record.
ACTION: recoverable (503, retryable, nothing done) | terminal (500, not retryable; the
        sandbox is reported lost) | refused (409, nothing done) | foreign (name another
        run as the owner) | unconfirmed (answer compute_released: false) | drop (do the
        work, cut the connection) | forget (inspect, attach, release, exec only: lose the
        sandbox as if its state were gone, then answer 404) | delay_ms=N |
        hold (wait until the provider stops, then answer) | fail (snapshot, resume,
        state_save, kill only) | crash (create_* only: stop as a killed provider would).
MODIFIER: times=N (first N calls only) | p=F (probability F in [0,1]); none = every call.
Example: release=recoverable:times=2;restore=delay_ms=300;inspect=forget:times=1";

#[derive(Debug, Parser)]
#[command(
    name = "sagents-local-provider",
    version,
    about = "Reference sandbox provider (plugin API v3) running sandboxes on this host"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the v3 API.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "SAGENTS_PROVIDER_LISTEN",
        default_value = "127.0.0.1:9090"
    )]
    pub listen: SocketAddr,
    /// Directory holding sandboxes, checkpoints and the provider's state.
    #[arg(long, env = "SAGENTS_PROVIDER_ROOT")]
    pub root: PathBuf,
    /// Active workspaces must lie inside this folder [default: ROOT/workspaces].
    #[arg(long, env = "SAGENTS_PROVIDER_WORKSPACE_ROOT")]
    pub workspace_root: Option<PathBuf>,
    /// Bearer token callers must present. Prefer `--token-file` or the variable: a command
    /// line is visible to every local user.
    #[arg(long, env = "SAGENTS_PROVIDER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// File holding the bearer token (one trailing newline ignored).
    #[arg(long, env = "SAGENTS_PROVIDER_TOKEN_FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// Serve without a token: every route but exec is open to anyone who can reach the
    /// provider (and attach hands out grants when it holds a grant secret). Without a token
    /// and without this flag the provider refuses to start.
    #[arg(long, env = "SAGENTS_PROVIDER_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,
    /// The id the service registers this provider under: named in its answers, and every
    /// grant must name it as its audience.
    #[arg(long, env = "SAGENTS_PROVIDER_ID", default_value = super::PROVIDER_ID)]
    pub provider_id: String,
    /// Let a sandbox ask for `network: host`, which shares the host's network (the service,
    /// its database, every loopback port). Without it such a sandbox is refused (422).
    #[arg(long, env = "SAGENTS_PROVIDER_ALLOW_HOST_NETWORK")]
    pub allow_host_network: bool,
    /// A connection that sends no complete request head for this many seconds is closed.
    #[arg(long, env = "SAGENTS_PROVIDER_HEADER_READ_TIMEOUT_SECONDS", default_value_t = super::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_seconds: u64,
    /// Connections served at once; past that, new ones wait until one closes.
    #[arg(long, env = "SAGENTS_PROVIDER_MAX_CONNECTIONS", default_value_t = super::DEFAULT_MAX_CONNECTIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
    /// Commands one sandbox may run at once; past that, exec answers 429 `exec.too_many`.
    #[arg(long, env = "SAGENTS_PROVIDER_MAX_EXECS_PER_SANDBOX", default_value_t = super::DEFAULT_MAX_EXECS_PER_SANDBOX, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_execs_per_sandbox: usize,
    /// How many seconds a release or restore call waits for its operation before answering
    /// `202 Accepted` with `Retry-After` (the operation runs on); keep it well under the
    /// service's provider call timeout.
    #[arg(long, env = "SAGENTS_PROVIDER_OPERATION_WAIT_SECONDS", default_value_t = super::DEFAULT_OPERATION_WAIT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    pub operation_wait_seconds: u64,
    /// Secret shared with the service to sign grants [default: generated, kept in ROOT].
    /// Prefer `--grant-secret-file` or the variable.
    #[arg(long, env = "SAGENTS_PROVIDER_GRANT_SECRET", hide_env_values = true)]
    pub grant_secret: Option<String>,
    /// File holding the grant secret (one trailing newline ignored).
    #[arg(
        long,
        env = "SAGENTS_PROVIDER_GRANT_SECRET_FILE",
        conflicts_with = "grant_secret"
    )]
    pub grant_secret_file: Option<PathBuf>,
    /// The service's grant public key (`ed25519-pub:...`, from `sagents grant public-key`):
    /// grants are checked with it, and this provider cannot mint any.
    #[arg(long, env = "SAGENTS_PROVIDER_GRANT_PUBLIC_KEY")]
    pub grant_public_key: Option<String>,
    /// File holding the grant public key.
    #[arg(
        long,
        env = "SAGENTS_PROVIDER_GRANT_PUBLIC_KEY_FILE",
        conflicts_with = "grant_public_key"
    )]
    pub grant_public_key_file: Option<PathBuf>,
    /// `namespaces`: each sandbox in its own user, PID, mount and network namespaces (needs
    /// bubblewrap; the provider refuses to start without it); `none`: on the host, unisolated.
    #[arg(long, env = "SAGENTS_PROVIDER_ISOLATION", default_value = "namespaces")]
    pub isolation: IsolationMode,
    /// Host uids (each also the gid) handed out one per sandbox, when the provider runs as
    /// root; give each provider on a host its own range.
    #[arg(long, env = "SAGENTS_PROVIDER_SANDBOX_UID_RANGE", value_name = "FIRST-LAST", default_value_t = super::isolation::DEFAULT_SANDBOX_UIDS)]
    pub sandbox_uid_range: UidRange,
    /// Older form: the first of 65536 sandbox uids.
    #[arg(
        long,
        env = "SAGENTS_PROVIDER_SANDBOX_UID",
        conflicts_with = "sandbox_uid_range"
    )]
    pub sandbox_uid: Option<u32>,
    /// Processes a sandbox may run when its spec sets no `max_processes`.
    #[arg(long, env = "SAGENTS_PROVIDER_DEFAULT_MAX_PROCESSES", default_value_t = Defaults::default().max_processes, value_parser = clap::value_parser!(u32).range(1..=MAX_PROCESSES as i64))]
    pub default_max_processes: u32,
    /// Memory (MiB, its `/tmp` included) a sandbox may use when its spec sets no `memory_mb`.
    #[arg(long, env = "SAGENTS_PROVIDER_DEFAULT_MEMORY_MB", default_value_t = Defaults::default().memory_mb, value_parser = clap::value_parser!(u64).range(MIN_MEMORY_MB..))]
    pub default_memory_mb: u64,
    /// CPU share (100 = one core) a sandbox gets when its spec sets no `cpu_percent`.
    #[arg(long, env = "SAGENTS_PROVIDER_DEFAULT_CPU_PERCENT", default_value_t = Defaults::default().cpu_percent, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub default_cpu_percent: u32,
    /// Size (MiB) of each sandbox's `/tmp`.
    #[arg(long, env = "SAGENTS_PROVIDER_DEFAULT_TMP_MB", default_value_t = Defaults::default().tmp_mb, value_parser = clap::value_parser!(u64).range(1..))]
    pub default_tmp_mb: u64,
    /// Disk (MiB) for the warm restore cache: a sandbox released with `snapshot_and_terminate`
    /// keeps its files here (no process survives), so a restore of that checkpoint on this
    /// host is a rename instead of an unpack; least recently kept out first. 0 turns it off.
    #[arg(long, env = "SAGENTS_PROVIDER_WARM_CACHE_MB", default_value_t = super::DEFAULT_WARM_CACHE_MB)]
    pub warm_cache_mb: u64,
    /// Archives unpacked at once; further restores wait their turn [default: the cores].
    #[arg(long, env = "SAGENTS_PROVIDER_RESTORE_CONCURRENCY", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub restore_concurrency: Option<usize>,
    /// Test only: faults to inject (see below).
    #[arg(long, env = "SAGENTS_PROVIDER_FAULT_INJECTION", value_name = "SPEC", long_help = FAULT_HELP)]
    pub fault_injection: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is empty")]
    Empty(PathBuf),
    #[error("--sandbox-uid: {0}")]
    UidRange(#[from] BadUidRange),
}

/// A secret read from `path`, without one trailing newline; a file others may read is used
/// but warned about.
pub fn read_secret_file(path: &Path) -> Result<String, SecretFileError> {
    use std::os::unix::fs::PermissionsExt;
    let read_err = |source| SecretFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(read_err)?;
    let mode = std::fs::metadata(path)
        .map_err(read_err)?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        tracing::warn!(path = %path.display(), mode = format!("{:o}", mode & 0o777), "a secret file is readable by other users; make it 0600");
    }
    let secret = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if secret.is_empty() {
        return Err(SecretFileError::Empty(path.to_path_buf()));
    }
    Ok(secret.to_owned())
}

impl ServeArgs {
    /// The configuration, with secrets read from their files.
    pub fn into_config(self) -> Result<Config, SecretFileError> {
        let token = match &self.token_file {
            Some(p) => Some(read_secret_file(p)?),
            None => self.token,
        };
        let grant_secret = match &self.grant_secret_file {
            Some(p) => Some(read_secret_file(p)?),
            None => self.grant_secret,
        };
        let grant_public_key = match &self.grant_public_key_file {
            Some(path) => {
                Some(
                    std::fs::read_to_string(path).map_err(|source| SecretFileError::Read {
                        path: path.clone(),
                        source,
                    })?,
                )
            }
            None => self.grant_public_key,
        };
        Ok(Config {
            listen: self.listen,
            root: self.root,
            workspace_root: self.workspace_root,
            token,
            insecure_no_auth: self.insecure_no_auth,
            provider_id: self.provider_id,
            allow_host_network: self.allow_host_network,
            header_read_timeout: std::time::Duration::from_secs(self.header_read_timeout_seconds),
            max_connections: self.max_connections,
            max_execs_per_sandbox: self.max_execs_per_sandbox,
            operation_wait: std::time::Duration::from_secs(self.operation_wait_seconds),
            grant_secret,
            grant_public_key,
            clock: super::Clock::system(),
            fault_injection: self.fault_injection,
            isolation: self.isolation,
            sandbox_uids: match self.sandbox_uid {
                Some(first) => UidRange::starting_at(first, 65_536)?,
                None => self.sandbox_uid_range,
            },
            warm_cache_mb: self.warm_cache_mb,
            restore_concurrency: self
                .restore_concurrency
                .unwrap_or_else(super::default_restore_concurrency),
            defaults: Defaults {
                max_processes: self.default_max_processes,
                memory_mb: self.default_memory_mb,
                cpu_percent: self.default_cpu_percent,
                tmp_mb: self.default_tmp_mb,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_into_a_config() {
        let cli = Cli::try_parse_from([
            "sagents-local-provider",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--root",
            "/tmp/r",
            "--token",
            "t",
            "--fault-injection",
            "release=drop:times=1",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command;
        let cfg = args.into_config().unwrap();
        assert_eq!(cfg.root, PathBuf::from("/tmp/r"));
        assert_eq!(cfg.token.as_deref(), Some("t"));
        assert_eq!(cfg.fault_injection.as_deref(), Some("release=drop:times=1"));
        assert!(Cli::try_parse_from(["sagents-local-provider", "serve"]).is_err());
    }

    #[test]
    fn the_doors_are_closed_unless_flags_open_them() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["sagents-local-provider", "serve", "--root", "/tmp/r"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|cli| {
                let Command::Serve(args) = cli.command;
                args.into_config().unwrap()
            })
        };
        let cfg = parse(&[]).unwrap();
        assert!(!cfg.insecure_no_auth && !cfg.allow_host_network);
        assert_eq!(cfg.provider_id, crate::PROVIDER_ID);
        assert_eq!(cfg.header_read_timeout, crate::DEFAULT_HEADER_READ_TIMEOUT);
        assert_eq!(cfg.max_connections, crate::DEFAULT_MAX_CONNECTIONS);
        assert_eq!(
            cfg.max_execs_per_sandbox,
            crate::DEFAULT_MAX_EXECS_PER_SANDBOX
        );
        assert_eq!(cfg.operation_wait, crate::DEFAULT_OPERATION_WAIT);
        assert_eq!(cfg.warm_cache_mb, crate::DEFAULT_WARM_CACHE_MB);
        assert_eq!(
            cfg.restore_concurrency,
            crate::default_restore_concurrency()
        );
        let cfg = parse(&[
            "--insecure-no-auth",
            "--allow-host-network",
            "--provider-id",
            "edge-1",
            "--header-read-timeout-seconds",
            "5",
            "--max-connections",
            "3",
            "--max-execs-per-sandbox",
            "4",
            "--operation-wait-seconds",
            "7",
            "--warm-cache-mb",
            "0",
            "--restore-concurrency",
            "3",
        ])
        .unwrap();
        assert_eq!((cfg.warm_cache_mb, cfg.restore_concurrency), (0, 3));
        assert_eq!(cfg.operation_wait, std::time::Duration::from_secs(7));
        assert!(cfg.insecure_no_auth && cfg.allow_host_network);
        assert_eq!(cfg.provider_id, "edge-1");
        assert_eq!(cfg.header_read_timeout, std::time::Duration::from_secs(5));
        assert_eq!((cfg.max_connections, cfg.max_execs_per_sandbox), (3, 4));
        for zero in [
            "--operation-wait-seconds",
            "--header-read-timeout-seconds",
            "--max-connections",
            "--max-execs-per-sandbox",
            "--restore-concurrency",
        ] {
            assert!(parse(&[zero, "0"]).is_err(), "{zero} 0");
        }
    }

    #[test]
    fn secrets_come_from_files() {
        let dir = tempfile::tempdir().unwrap();
        let (tok, sec) = (dir.path().join("token"), dir.path().join("secret"));
        std::fs::write(&tok, "from-file\n").unwrap();
        std::fs::write(&sec, "s3cret").unwrap();
        let parse = |extra: &[&str]| {
            let mut argv = vec!["sagents-local-provider", "serve", "--root", "/tmp/r"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv)
        };
        let cli = parse(&[
            "--token-file",
            tok.to_str().unwrap(),
            "--grant-secret-file",
            sec.to_str().unwrap(),
        ])
        .unwrap();
        let Command::Serve(args) = cli.command;
        let cfg = args.into_config().unwrap();
        assert_eq!(cfg.token.as_deref(), Some("from-file"));
        assert_eq!(cfg.grant_secret.as_deref(), Some("s3cret"));
        assert!(parse(&["--token", "t", "--token-file", tok.to_str().unwrap()]).is_err());
        std::fs::write(&tok, "\n").unwrap();
        let Command::Serve(args) = parse(&["--token-file", tok.to_str().unwrap()])
            .unwrap()
            .command;
        assert!(matches!(args.into_config(), Err(SecretFileError::Empty(_))));
    }

    #[test]
    fn a_public_key_comes_from_a_file_and_excludes_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("grant.pub");
        std::fs::write(&key, "ed25519-pub:abc\n").unwrap();
        let argv = |extra: &[&str]| {
            let mut argv = vec!["sagents-local-provider", "serve", "--root", "/tmp/r"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv)
        };
        let path = key.to_str().unwrap();
        let Command::Serve(args) = argv(&["--grant-public-key-file", path]).unwrap().command;
        let cfg = args.into_config().unwrap();
        assert_eq!(cfg.grant_public_key.as_deref(), Some("ed25519-pub:abc\n"));
        // Both is refused when the provider starts (an empty variable counts as unset).
        assert!(argv(&["--grant-public-key-file", path, "--grant-secret", "s"]).is_ok());
        assert!(argv(&["--grant-public-key", "k", "--grant-public-key-file", path]).is_err());
    }

    #[test]
    fn sandbox_bounds_and_uids_come_from_flags() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["sagents-local-provider", "serve", "--root", "/tmp/r"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| {
                let Command::Serve(args) = c.command;
                args.into_config()
            })
        };
        let cfg = parse(&[]).unwrap().unwrap();
        assert_eq!(cfg.defaults, Defaults::default());
        assert_eq!(
            cfg.sandbox_uids,
            super::super::isolation::DEFAULT_SANDBOX_UIDS
        );
        let cfg = parse(&[
            "--sandbox-uid-range",
            "200000-200009",
            "--default-max-processes",
            "64",
            "--default-memory-mb",
            "256",
            "--default-cpu-percent",
            "50",
            "--default-tmp-mb",
            "8",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (cfg.sandbox_uids.first, cfg.sandbox_uids.last),
            (200_000, 200_009)
        );
        assert_eq!(
            cfg.defaults,
            Defaults {
                max_processes: 64,
                memory_mb: 256,
                cpu_percent: 50,
                tmp_mb: 8
            }
        );
        let old = parse(&["--sandbox-uid", "300000"]).unwrap().unwrap();
        assert_eq!(
            (old.sandbox_uids.first, old.sandbox_uids.last),
            (300_000, 365_535)
        );
        for bad in [
            &["--sandbox-uid-range", "0-10"][..],
            &["--sandbox-uid-range", "1-2", "--sandbox-uid", "5"],
            &["--default-memory-mb", "8"],
            &["--default-max-processes", "0"],
            &["--default-cpu-percent", "0"],
            &["--default-tmp-mb", "0"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(
            parse(&["--sandbox-uid", "0"]).unwrap(),
            Err(SecretFileError::UidRange(_))
        ));
    }
}
