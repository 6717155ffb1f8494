//! Running one command inside a sandbox: in its namespaces (or, without isolation, its
//! process group), its directory and its limits, with bounded output and a timeout.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::cgroup::{self, SandboxCgroup};
use super::isolation::{no_new_privs, Sandboxer, WORKSPACE};
use super::process::{Leader, Limits, SAFE_PATH};
use sagents_plugin_api::wire::ExecResponse;

/// Per stream; keeps an exec answer well under a client's 1 MiB response cap.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
pub const MAX_STDIN_BYTES: usize = 1024 * 1024;
pub const MAX_TIMEOUT_SECONDS: u64 = 3600;

/// Where a command runs.
pub enum Place<'a> {
    /// In the sandbox's namespaces; `cwd` is relative to its workspace.
    Isolated {
        sandboxer: &'a Sandboxer,
        leader: Leader,
        cwd: &'a Path,
    },
    /// On the host, in the sandbox's folder and process group.
    Host {
        cwd: &'a Path,
        home: &'a Path,
        process_group: i32,
    },
}

pub struct ExecPlan<'a> {
    pub argv: &'a [String],
    pub place: Place<'a>,
    pub env: Option<&'a BTreeMap<String, String>>,
    pub stdin: Option<&'a str>,
    pub timeout: Duration,
    pub limits: Limits,
    /// The sandbox's control group, which the command joins before it starts.
    pub cgroup: Option<SandboxCgroup>,
}

/// The largest number of variables a request's `env` may set, and the longest value.
pub const MAX_ENV_VARS: usize = 256;
pub const MAX_ENV_VALUE_BYTES: usize = 32 * 1024;

/// Checks a request's `env`: names are `[A-Za-z_][A-Za-z0-9_]*` and not the dynamic loader's
/// (`LD_*`) nor the provider's (`SAGENTS_*`), values hold no NUL. The variables reach only the
/// command, never a host process.
pub fn check_env(env: Option<&BTreeMap<String, String>>) -> Result<(), ExecError> {
    let Some(env) = env else { return Ok(()) };
    if env.len() > MAX_ENV_VARS {
        return Err(ExecError::TooManyEnv);
    }
    for (k, v) in env {
        let mut chars = k.chars();
        let well_formed = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !well_formed || k.len() > 256 {
            return Err(ExecError::BadEnvName(k.chars().take(80).collect()));
        }
        if k.starts_with("LD_") {
            return Err(ExecError::LoaderEnv(k.clone()));
        }
        // The provider finds a sandbox's leader by this tag; a command must not wear another's.
        if k.starts_with("SAGENTS_") {
            return Err(ExecError::ReservedEnv(k.clone()));
        }
        if v.contains('\0') || v.len() > MAX_ENV_VALUE_BYTES {
            return Err(ExecError::BadEnvValue(k.clone()));
        }
    }
    Ok(())
}

fn command(plan: &ExecPlan<'_>, program: &str, args: &[String]) -> tokio::process::Command {
    let caller_env = plan.env.into_iter().flatten();
    match &plan.place {
        Place::Isolated {
            sandboxer,
            leader,
            cwd,
        } => {
            let inside = match cwd.as_os_str().is_empty() {
                true => WORKSPACE.to_owned(),
                false => Path::new(WORKSPACE).join(cwd).display().to_string(),
            };
            let mut vars = vec![
                ("PATH".to_owned(), SAFE_PATH.to_owned()),
                ("HOME".to_owned(), WORKSPACE.to_owned()),
                ("PWD".to_owned(), inside.clone()),
            ];
            vars.extend(caller_env.map(|(k, v)| (k.clone(), v.clone())));
            sandboxer.command(leader, &inside, &vars, plan.argv)
        }
        Place::Host {
            cwd,
            home,
            process_group,
        } => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args)
                .current_dir(cwd)
                .env_clear()
                .env("PATH", SAFE_PATH)
                .env("HOME", home)
                .env("PWD", cwd)
                .envs(caller_env)
                .process_group(*process_group);
            cmd
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("argv must name a program")]
    EmptyArgv,
    #[error("env name `{0}` is not allowed: names are letters, digits and `_`, not starting with a digit")]
    BadEnvName(String),
    #[error("env `{0}` is refused: the dynamic loader's variables (`LD_*`) cannot be set")]
    LoaderEnv(String),
    #[error("env `{0}` is refused: `SAGENTS_*` names are the provider's own")]
    ReservedEnv(String),
    #[error("env `{0}`: a value holds a NUL byte or is longer than {MAX_ENV_VALUE_BYTES} bytes")]
    BadEnvValue(String),
    #[error("env sets more than {MAX_ENV_VARS} variables")]
    TooManyEnv,
    #[error("argv[0] must not contain `=` (it would be read as a variable)")]
    ProgramWithEquals,
    #[error("stdin is larger than {MAX_STDIN_BYTES} bytes")]
    StdinTooLarge,
    #[error("the command could not be started: {0}")]
    Spawn(std::io::Error),
    #[error("waiting for the command failed: {0}")]
    Wait(std::io::Error),
}

#[derive(Default)]
struct Capture {
    data: Vec<u8>,
    truncated: bool,
}

async fn drain<R: AsyncRead + Unpin>(mut r: R, out: Arc<Mutex<Capture>>) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut c = out.lock().unwrap_or_else(|e| e.into_inner());
        let room = MAX_OUTPUT_BYTES.saturating_sub(c.data.len());
        c.data.extend_from_slice(&buf[..n.min(room)]);
        if n > room {
            c.truncated = true;
        }
    }
}

fn take(c: &Arc<Mutex<Capture>>) -> (String, bool) {
    let c = c.lock().unwrap_or_else(|e| e.into_inner());
    (String::from_utf8_lossy(&c.data).into_owned(), c.truncated)
}

pub async fn run(plan: ExecPlan<'_>) -> Result<ExecResponse, ExecError> {
    let (program, args) = plan.argv.split_first().ok_or(ExecError::EmptyArgv)?;
    if program.is_empty() || program.contains('\0') {
        return Err(ExecError::EmptyArgv);
    }
    if plan.stdin.is_some_and(|s| s.len() > MAX_STDIN_BYTES) {
        return Err(ExecError::StdinTooLarge);
    }
    check_env(plan.env)?;
    if matches!(plan.place, Place::Isolated { .. }) && program.contains('=') {
        return Err(ExecError::ProgramWithEquals);
    }
    let mut cmd = command(&plan, program, args);
    cmd.stdin(if plan.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let limits = plan.limits;
    let filter = match &plan.place {
        Place::Isolated { sandboxer, .. } => Some(sandboxer.filter().clone()),
        Place::Host { .. } => None,
    };
    let join = match &plan.cgroup {
        Some(cg) => cg.open_procs().map_err(ExecError::Spawn)?,
        None => Vec::new(),
    };
    // SAFETY: the closure only calls write(2), setrlimit(2) and prctl(2), which are
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            cgroup::join(&join)?;
            no_new_privs()?;
            limits.apply()?;
            match &filter {
                Some(f) => f.install(),
                None => Ok(()),
            }
        });
    }
    let mut child = cmd.spawn().map_err(ExecError::Spawn)?;
    let out = Arc::new(Mutex::new(Capture::default()));
    let err = Arc::new(Mutex::new(Capture::default()));
    let mut readers = Vec::new();
    if let Some(s) = child.stdout.take() {
        readers.push(tokio::spawn(drain(s, out.clone())));
    }
    if let Some(s) = child.stderr.take() {
        readers.push(tokio::spawn(drain(s, err.clone())));
    }
    if let (Some(mut stdin), Some(input)) = (child.stdin.take(), plan.stdin) {
        let input = input.as_bytes().to_vec();
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    let (status, timed_out) = match tokio::time::timeout(plan.timeout, child.wait()).await {
        Ok(status) => (status.map_err(ExecError::Wait)?, false),
        Err(_) => {
            let _ = child.start_kill();
            (child.wait().await.map_err(ExecError::Wait)?, true)
        }
    };
    // Background descendants may hold the pipes open; what they print later is not waited for.
    for r in readers {
        let abort = r.abort_handle();
        if tokio::time::timeout(Duration::from_millis(200), r)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
    let (stdout, t1) = take(&out);
    let (stderr, t2) = take(&err);
    Ok(ExecResponse {
        exit_code: status.code(),
        stdout,
        stderr,
        truncated: t1 || t2,
        timed_out,
    })
}
