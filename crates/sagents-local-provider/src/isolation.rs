//! Namespaces per sandbox, through bubblewrap: a sandbox's leader is `bwrap` holding a new
//! user, PID, mount, IPC, UTS (and, unless the spec asks for the host's, network) namespace,
//! with the sandbox's files at [`WORKSPACE`], read-only system folders, a private `/tmp` and
//! the `/proc` of its own PID namespace. Commands join those namespaces with `nsenter`, so
//! they see what the leader sees and nothing of the provider. Root inside maps to an
//! unprivileged id outside when the provider runs as root. The host side of a command sees no
//! caller input but its argv: helpers run by absolute path with a fixed environment, and the
//! caller's variables are set inside by `env -i`. Inside, a command holds no capability, runs
//! under [`Filter`] (seccomp), and cannot create a user namespace (`--disable-userns`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sagents_text_enum::text_enum;

mod ready;
mod spawn;
mod stage;
mod uids;

pub use uids::{BadUidRange, UidRange, DEFAULT_SANDBOX_UIDS};

use super::paths::{self, OpenDir};
use super::process::{start_time, system_program, Leader, SAFE_PATH, SANDBOX_TAG};
use super::seccomp::Filter;
use sagents_plugin_api::spec::NetworkMode;

/// Where a sandbox sees its own files; its working directory and `HOME`.
pub const WORKSPACE: &str = "/workspace";
const SYSTEM_DIRS: &[&str] = &[
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc",
];

text_enum! {
    pub enum IsolationMode as "isolation mode" {
        Namespaces => "namespaces",
        None => "none",
    }
}

#[derive(Debug, thiserror::Error)]
#[error("sandbox namespaces are unavailable ({0}); start with `--isolation none` to run sandboxes without isolation")]
pub struct Unavailable(String);

/// Starts and enters namespaced sandboxes.
#[derive(Debug, Clone)]
pub struct Sandboxer {
    /// The host uids sandboxes run as, when the provider can choose (runs as root).
    uids: Option<UidRange>,
    /// The size of each sandbox's `/tmp`.
    tmp_bytes: Option<u64>,
    helpers: Arc<Helpers>,
    filter: Filter,
    /// Where a sandbox's folder is bound for bwrap, when the provider can mount (runs as root).
    stage: Option<stage::Stage>,
}

/// The host programs the provider starts, by absolute path: a caller's input never chooses
/// which file the host runs.
#[derive(Debug)]
struct Helpers {
    bwrap: PathBuf,
    nsenter: PathBuf,
    setpriv: PathBuf,
    env: PathBuf,
    /// The leader inside the sandbox, where the host's system folders are bound read-only:
    /// a shell that signals the sandbox is set up, then `sleep`.
    sh: PathBuf,
    sleep: PathBuf,
}

impl Helpers {
    fn find(root: bool) -> Result<Self, Unavailable> {
        let find = |name| system_program(name, root).map_err(|e| Unavailable(e.to_string()));
        Ok(Helpers {
            bwrap: find("bwrap")?,
            nsenter: find("nsenter")?,
            setpriv: find("setpriv")?,
            env: find("env")?,
            sh: find("sh")?,
            sleep: find("sleep")?,
        })
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2(2) writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads bwrap's `--info-fd` JSON object, waiting at most `limit`.
fn read_info(fd: &OwnedFd, limit: Duration) -> io::Result<serde_json::Value> {
    let deadline = Instant::now() + limit;
    let mut data = Vec::new();
    loop {
        if !ready::readable_by(fd, deadline) {
            return Err(io::Error::other("bwrap did not report its sandbox in time"));
        }
        let mut buf = [0u8; 1024];
        // SAFETY: `buf` is valid for writes of its length.
        let got = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if got <= 0 {
            return Err(io::Error::other("bwrap exited before starting the sandbox"));
        }
        data.extend_from_slice(&buf[..got as usize]);
        if let Ok(v) = serde_json::from_slice(&data) {
            return Ok(v);
        }
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Hands everything below the open folder `dir` to `uid`/`gid`, by descriptor: each entry is
/// opened `O_PATH | O_NOFOLLOW` relative to its folder and changed through that descriptor,
/// so no symlink is followed and no path is resolved again. A file with other hard links is
/// left alone: its other names may lie outside.
fn chown_tree(dir: BorrowedFd<'_>, uid: u32, gid: u32, depth: usize) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if depth > paths::MAX_DEPTH {
        return Err(paths::too_deep());
    }
    // SAFETY: fchown(2) on an open descriptor.
    check(unsafe { libc::fchown(dir.as_raw_fd(), uid, gid) })?;
    for name in paths::read_names(dir)? {
        let node = match paths::open_at(dir, &name, libc::O_PATH) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            other => std::fs::File::from(other?),
        };
        let meta = node.metadata()?;
        if meta.is_dir() {
            match paths::open_dir_at(dir, &name) {
                Ok(sub) if same_file(&sub, &meta) => chown_tree(sub.as_fd(), uid, gid, depth + 1)?,
                _ => continue,
            }
        } else if meta.nlink() <= 1 {
            // SAFETY: an empty path with AT_EMPTY_PATH changes the `O_PATH` descriptor's file.
            check(unsafe {
                libc::fchownat(
                    node.as_raw_fd(),
                    c"".as_ptr(),
                    uid,
                    gid,
                    libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
                )
            })?;
        }
    }
    Ok(())
}

/// Mode 0700 on the sandbox's own folder.
fn private(dir: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fchmod(2) on an open descriptor.
    check(unsafe { libc::fchmod(dir.as_raw_fd(), 0o700) })
}

fn same_file(fd: &OwnedFd, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(now) = fd
        .try_clone()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata())
    else {
        return false;
    };
    (now.dev(), now.ino()) == (meta.dev(), meta.ino())
}

impl Sandboxer {
    /// Checks that a namespaced sandbox can be started on this host, over a folder in `under`.
    pub async fn detect(
        uids: UidRange,
        tmp_bytes: Option<u64>,
        under: &Path,
    ) -> Result<Self, Unavailable> {
        // SAFETY: geteuid(2) has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mut sb = Sandboxer {
            uids: root.then_some(uids),
            tmp_bytes,
            helpers: Arc::new(Helpers::find(root)?),
            filter: Filter::new(),
            stage: match root {
                true => Some(stage::Stage::new(under).map_err(|e| Unavailable(e.to_string()))?),
                false => None,
            },
        };
        let probe = under.join(format!("probe-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir(&probe).map_err(|e| Unavailable(e.to_string()))?;
        let opened = OpenDir::open(&probe).map_err(|e| Unavailable(e.to_string()))?;
        let user = sb.uids.map(|r| (r.first, r.first));
        sb.prepare(opened.fd.as_fd(), user)
            .map_err(|e| Unavailable(e.to_string()))?;
        let mut out = sb.probe(&opened, user, under).await;
        if let (Err(e), Some(_)) = (&out, &sb.stage) {
            tracing::warn!(error = %e, "the sandbox folder cannot be staged by descriptor (open_tree, move_mount); bwrap binds it with --bind-fd, which fails a start whose folder was moved meanwhile");
            sb.stage = None;
            out = sb.probe(&opened, user, under).await;
        }
        let _ = std::fs::remove_dir(&probe);
        out.map(|()| sb)
    }

    /// Runs `true` in a sandbox over `opened`, as `user`.
    async fn probe(
        &self,
        opened: &OpenDir,
        user: Option<(u32, u32)>,
        under: &Path,
    ) -> Result<(), Unavailable> {
        let (mut cmd, setup) = self
            .bwrap(opened.fd.as_fd(), NetworkMode::None, user, Vec::new())
            .map_err(|e| Unavailable(e.to_string()))?;
        // SAFETY: the setup runs only async-signal-safe calls.
        unsafe { cmd.pre_exec(move || setup.apply()) };
        let out = cmd
            .args(["--", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .await;
        match out {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(Unavailable(format!(
                "bwrap: {}; every folder above {} must be searchable by the sandbox user",
                String::from_utf8_lossy(&o.stderr).trim(),
                under.display()
            ))),
            Err(e) => Err(Unavailable(format!("bwrap could not be run: {e}"))),
        }
    }

    /// The uids sandboxes are handed out from, when the provider runs as root.
    pub fn uids(&self) -> Option<UidRange> {
        self.uids
    }

    /// Hands a sandbox's open folder to the ids its processes run as, `user` (the sandbox's
    /// own host ids; `None` when the provider cannot choose, and then nothing changes). The
    /// folder's owner is never adopted.
    pub fn prepare(&self, dir: BorrowedFd<'_>, user: Option<(u32, u32)>) -> io::Result<()> {
        let Some((uid, gid)) = user else {
            return Ok(());
        };
        chown_tree(dir, uid, gid, 0)?;
        private(dir)
    }

    /// bwrap over the open folder `dir`, bound at [`WORKSPACE`] by its descriptor: staged
    /// (see [`stage`]) when the provider runs as root, else with `--bind-fd`, where bwrap
    /// resolves the descriptor's path and dies unless what it mounted is that folder. It runs
    /// as `user`, in the control groups whose `cgroup.procs` are `cgroup` (joined first, while
    /// the child still has the provider's ids). The host-side monitor works in the folder too.
    /// The child runs the returned [`spawn::Setup`] before it execs.
    fn bwrap(
        &self,
        dir: BorrowedFd<'_>,
        network: NetworkMode,
        user: Option<(u32, u32)>,
        cgroup: Vec<OwnedFd>,
    ) -> io::Result<(tokio::process::Command, spawn::Setup)> {
        let mut cmd = tokio::process::Command::new(&self.helpers.bwrap);
        cmd.args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--disable-userns",
            "--cap-drop",
            "ALL",
            "--uid",
            "0",
            "--gid",
            "0",
            "--new-session",
        ]);
        if network == NetworkMode::None {
            cmd.arg("--unshare-net");
        }
        for name in SYSTEM_DIRS {
            let host = Path::new("/").join(name);
            match std::fs::read_link(&host) {
                Ok(target) => {
                    cmd.arg("--symlink").arg(target).arg(&host);
                }
                Err(_) if host.is_dir() => {
                    cmd.arg("--ro-bind").arg(&host).arg(&host);
                }
                Err(_) => {}
            }
        }
        let dir_fd = dir.as_raw_fd();
        let plan = match (&self.stage, user) {
            (Some(st), Some((uid, gid))) => Some(st.plan(dir_fd, uid, gid)?),
            _ => None,
        };
        cmd.args(["--dev", "/dev", "--proc", "/proc"]);
        if let Some(bytes) = self.tmp_bytes {
            cmd.arg("--size").arg(bytes.to_string());
        }
        cmd.args(["--tmpfs", "/tmp"]);
        match (&plan, &self.stage) {
            (Some(_), Some(st)) => cmd.arg("--bind").arg(st.path()),
            _ => cmd.arg("--bind-fd").arg(dir_fd.to_string()),
        }
        .args([
            WORKSPACE, "--chdir", WORKSPACE, "--setenv", "HOME", WORKSPACE,
        ])
        .env_clear()
        .env("PATH", SAFE_PATH)
        .stdin(Stdio::null())
        .kill_on_drop(false);
        let setup = spawn::Setup {
            cgroup,
            ids: user.filter(|_| plan.is_none()),
            plan,
            dir_fd,
        };
        Ok((cmd, setup))
    }

    /// Starts the sandbox's leader: `sleep infinity` (after a shell that says the sandbox is
    /// set up, [`ready`]) as the first process of its namespaces, as host uid `user` (when the provider runs as root), in the control groups whose
    /// `cgroup.procs` are `cgroup`. The leader recorded is the namespace's init, whose death
    /// ends every process in it.
    pub fn spawn_leader(
        &self,
        dir: &OpenDir,
        sandbox_id: &str,
        network: NetworkMode,
        user: Option<u32>,
        owned: bool,
        cgroup: Vec<OwnedFd>,
    ) -> io::Result<Leader> {
        let user = user.filter(|_| self.uids.is_some()).map(|u| (u, u));
        match owned {
            true => private(dir.fd.as_fd())?,
            false => self.prepare(dir.fd.as_fd(), user)?,
        }
        let (info_r, info_w) = pipe()?;
        let info_fd = info_w.as_raw_fd();
        let (ready_r, ready_w) = pipe()?;
        let signal = ready::Signal::new(ready_w, &[info_fd, dir.fd.as_raw_fd()])?;
        let (ready_fd, ready_target) = signal.raw();
        // The monitor bwrap leaves outside the namespaces works in the sandbox's folder, so
        // the host sees whose it is.
        let (mut cmd, setup) = self.bwrap(dir.fd.as_fd(), network, user, cgroup)?;
        cmd.args(["--setenv", SANDBOX_TAG, sandbox_id, "--info-fd"])
            .arg(info_fd.to_string())
            .arg("--")
            .args(signal.leader_argv(&self.helpers.sh, &self.helpers.sleep));
        // The ready signal's target is neither descriptor bwrap is told of.
        let child = spawn::spawn(cmd.as_std(), &|| {
            setup.apply()?;
            // SAFETY: fcntl(2) on the info pipe's write end, open until the child has started.
            check(unsafe { libc::fcntl(info_fd, libc::F_SETFD, 0) })?;
            ready::install(ready_fd, ready_target)?;
            no_new_privs()
        })?;
        drop(info_w);
        drop(signal);
        let info = match read_info(&info_r, Duration::from_secs(10)) {
            Ok(info) => info,
            Err(e) => {
                child.kill();
                child.reap_when_done();
                return Err(e);
            }
        };
        let pid = info["child-pid"]
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| io::Error::other("bwrap reported no child pid"))?;
        let pid_ns = info["pid-namespace"].as_u64();
        let start_time =
            start_time(pid).ok_or_else(|| io::Error::other("the sandbox leader exited at once"))?;
        let ready = ready::wait(&ready_r, Duration::from_secs(10));
        if ready.is_err() {
            child.kill();
        }
        child.reap_when_done();
        ready?;
        Ok(Leader {
            pid,
            start_time,
            pid_ns,
            host_uid: user.map(|(uid, _)| uid),
        })
    }

    /// The seccomp filter every command gets.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// `argv` run inside the leader's namespaces, in `cwd` (a path inside the sandbox), with
    /// exactly `vars` as its environment. The host side (`nsenter`) gets a fixed environment;
    /// `vars` are set by an `env -i` that runs inside, with every capability dropped. The
    /// command dies with the `nsenter` that started it.
    pub fn command(
        &self,
        leader: &Leader,
        cwd: &str,
        vars: &[(String, String)],
        argv: &[String],
    ) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.helpers.nsenter);
        cmd.env_clear()
            .env("PATH", SAFE_PATH)
            .arg("-t")
            .arg(leader.pid.to_string())
            .args(["-U", "-m", "-p", "-n", "-i", "-u", "-C", "-r", "--"])
            .arg(&self.helpers.setpriv)
            .args([
                "--pdeathsig",
                "KILL",
                "--inh-caps=-all",
                "--ambient-caps=-all",
                "--bounding-set=-all",
                "--",
            ])
            .arg(&self.helpers.env)
            .args(["-i", "-C", cwd, "--"])
            .args(vars.iter().map(|(k, v)| format!("{k}={v}")))
            .args(argv);
        cmd
    }
}

/// Sets `no_new_privs` on the calling process; async-signal-safe.
pub fn no_new_privs() -> io::Result<()> {
    // SAFETY: prctl(2) with PR_SET_NO_NEW_PRIVS takes no pointers.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
