//! Command line of `sagents-local-provider`; every flag is also a `SAGENTS_PROVIDER_*`
//! variable, and flags win.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::{Config, IsolationMode};

const FAULT_HELP: &str = "\
Test only: inject faults. SPEC is RULE(;RULE)*, RULE is POINT=ACTION(:MODIFIER)*.
POINT: capabilities, provision, inspect, attach, release, restore, exec, list_sandboxes,
       list_checkpoints, delete_checkpoint,
       snapshot (the archive step, after the pause), resume (after a failed snapshot).
ACTION: recoverable (503, retryable, nothing done) | terminal (500, not retryable; the
        sandbox is reported lost) | refused (409, nothing done) | foreign (name another
        run as the owner) | unconfirmed (answer compute_released: false) | drop (do the
        work, cut the connection) | forget (inspect, attach, release, exec only: lose the
        sandbox as if its state were gone, then answer 404) | delay_ms=N |
        fail (snapshot and resume only).
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
    /// Bearer token callers must present.
    #[arg(long, env = "SAGENTS_PROVIDER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Secret shared with the service to sign grants [default: generated, kept in ROOT].
    #[arg(long, env = "SAGENTS_PROVIDER_GRANT_SECRET", hide_env_values = true)]
    pub grant_secret: Option<String>,
    /// `namespaces`: each sandbox in its own user, PID, mount and network namespaces (needs
    /// bubblewrap; the provider refuses to start without it); `none`: on the host, unisolated.
    #[arg(long, env = "SAGENTS_PROVIDER_ISOLATION", default_value = "namespaces")]
    pub isolation: IsolationMode,
    /// Host uid and gid that root inside a sandbox maps to, when the provider runs as root.
    #[arg(long, env = "SAGENTS_PROVIDER_SANDBOX_UID", default_value_t = super::isolation::DEFAULT_SANDBOX_UID)]
    pub sandbox_uid: u32,
    /// Test only: faults to inject (see below).
    #[arg(long, env = "SAGENTS_PROVIDER_FAULT_INJECTION", value_name = "SPEC", long_help = FAULT_HELP)]
    pub fault_injection: Option<String>,
}

impl From<ServeArgs> for Config {
    fn from(a: ServeArgs) -> Self {
        Config {
            listen: a.listen,
            root: a.root,
            workspace_root: a.workspace_root,
            token: a.token,
            grant_secret: a.grant_secret,
            fault_injection: a.fault_injection,
            isolation: a.isolation,
            sandbox_uid: Some(a.sandbox_uid),
        }
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
        let cfg = Config::from(args);
        assert_eq!(cfg.root, PathBuf::from("/tmp/r"));
        assert_eq!(cfg.token.as_deref(), Some("t"));
        assert_eq!(cfg.fault_injection.as_deref(), Some("release=drop:times=1"));
        assert!(Cli::try_parse_from(["sagents-local-provider", "serve"]).is_err());
    }
}
