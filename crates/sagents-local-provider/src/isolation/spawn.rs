//! Starting a sandbox's bwrap without copying the provider: `clone(CLONE_VM | CLONE_VFORK)`
//! as `posix_spawn` does. A fork of the multi-threaded provider copies its page tables and
//! makes every page it writes afterwards a copy-on-write fault on both cores; in a burst of
//! restores that was a third of the provider's CPU. The child shares the parent's memory
//! until it execs (the calling thread waits meanwhile), so it runs only async-signal-safe
//! code that does not allocate, and changes its ids by raw syscalls: glibc's wrappers would
//! change every thread of the provider.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicI32, Ordering};

const STACK_BYTES: usize = 256 * 1024;

/// A started child: reaped in the background once it exits, see [`Child::reap_when_done`].
pub(super) struct Child {
    pub pid: i32,
    pidfd: OwnedFd,
}

struct Context<'a> {
    program: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    null: i32,
    setup: &'a (dyn Fn() -> io::Result<()> + Sync),
    failed: AtomicI32,
}

fn c_string(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(io::Error::other)
}

/// Runs `cmd`'s program with its arguments and exactly the variables it sets (the command must
/// have cleared its environment), stdio on `/dev/null`, after `setup` in the child.
pub(super) fn spawn(
    cmd: &std::process::Command,
    setup: &(dyn Fn() -> io::Result<()> + Sync),
) -> io::Result<Child> {
    let program = c_string(cmd.get_program())?;
    let args: Vec<CString> = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(c_string)
        .collect::<io::Result<_>>()?;
    let vars: Vec<CString> = cmd
        .get_envs()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .map(|(k, v)| {
            let mut kv = k.to_os_string();
            kv.push("=");
            kv.push(v);
            c_string(&kv)
        })
        .collect::<io::Result<_>>()?;
    let argv: Vec<*const libc::c_char> = args
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = vars
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    let ctx = Context {
        program: &program,
        argv: &argv,
        envp: &envp,
        null: null.as_raw_fd(),
        setup,
        failed: AtomicI32::new(0),
    };
    let pid = clone_vfork(&ctx)?;
    match ctx.failed.load(Ordering::SeqCst) {
        0 => {}
        errno => {
            reap(pid);
            return Err(io::Error::from_raw_os_error(errno));
        }
    }
    // SAFETY: pidfd_open(2) on our own unreaped child.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        kill(pid);
        reap(pid);
        return Err(e);
    }
    // SAFETY: a descriptor pidfd_open just returned, owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    Ok(Child { pid, pidfd })
}

fn kill(pid: i32) {
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

fn reap(pid: i32) {
    // SAFETY: waitpid(2) of our own child.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
}

impl Child {
    pub(super) fn kill(&self) {
        kill(self.pid);
    }

    /// Waits for the child's exit off every thread (its pidfd turns readable), then reaps it.
    pub(super) fn reap_when_done(self) {
        let Child { pid, pidfd } = self;
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    // SAFETY: an `OwnedFd` keeps the same open descriptor for its lifetime.
                    let fd = unsafe {
                        tokio::io::unix::AsyncFd::register_with_interest(
                            pidfd,
                            tokio::io::Interest::READABLE,
                        )
                    };
                    match fd {
                        // Readable once the child has exited: the wait returns at once.
                        Ok(fd) if fd.readable().await.is_ok() => reap(pid),
                        _ => drop(tokio::task::spawn_blocking(move || reap(pid))),
                    }
                });
            }
            Err(_) => {
                std::thread::spawn(move || reap(pid));
            }
        }
    }
}

/// Signals blocked around the clone, so no handler of the provider's runs in the child.
fn clone_vfork(ctx: &Context<'_>) -> io::Result<i32> {
    // SAFETY: an anonymous private mapping, unmapped below once the child has exec'd or died.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STACK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: sigset_t is plain data; sigfillset/pthread_sigmask fill and read it.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let top = (stack as usize + STACK_BYTES) & !15;
        let pid = libc::clone(
            child_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            ctx as *const Context<'_> as *mut libc::c_void,
        );
        let e = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        libc::munmap(stack, STACK_BYTES);
        if pid < 0 {
            return Err(e);
        }
        pid
    };
    Ok(pid)
}

extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Context`, alive while the parent waits for this child.
    let ctx = unsafe { &*(arg as *const Context<'_>) };
    let fail = |errno: i32| -> ! {
        ctx.failed.store(errno.max(1), Ordering::SeqCst);
        // SAFETY: _exit(2) ends this child only.
        unsafe { libc::_exit(127) }
    };
    // SAFETY: sigaction/sigprocmask/dup2/execve with valid arguments; nothing allocates.
    unsafe {
        for sig in 1..libc::SIGRTMAX() {
            let mut cur: libc::sigaction = std::mem::zeroed();
            let handled = libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                && cur.sa_sigaction != libc::SIG_DFL
                && cur.sa_sigaction != libc::SIG_IGN;
            if handled || sig == libc::SIGPIPE {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        for fd in 0..3 {
            if libc::dup2(ctx.null, fd) < 0 {
                fail(*libc::__errno_location());
            }
        }
        if let Err(e) = (ctx.setup)() {
            fail(e.raw_os_error().unwrap_or(libc::EINVAL));
        }
        libc::execve(ctx.program.as_ptr(), ctx.argv.as_ptr(), ctx.envp.as_ptr());
        fail(*libc::__errno_location())
    }
}

/// What the child does before it execs bwrap: joins the sandbox's control groups, stages its
/// folder (or, without a stage, keeps the folder's descriptor for `--bind-fd`), works in it,
/// and takes the sandbox's ids. Async-signal-safe, allocation-free. Staged, the descriptor
/// stays close-on-exec: a sandbox process holding it could climb out.
pub(super) struct Setup {
    pub cgroup: Vec<OwnedFd>,
    pub plan: Option<super::stage::Plan>,
    pub dir_fd: i32,
    /// The ids to take when there is no plan (a plan takes them itself).
    pub ids: Option<(u32, u32)>,
}

impl Setup {
    pub(super) fn apply(&self) -> io::Result<()> {
        let check = |rc: libc::c_int| match rc {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        };
        crate::cgroup::join(&self.cgroup)?;
        match &self.plan {
            Some(plan) => plan.apply()?,
            // SAFETY: fcntl(2) on a descriptor the parent keeps open until the child has
            // started.
            None => check(unsafe { libc::fcntl(self.dir_fd, libc::F_SETFD, 0) })?,
        }
        // SAFETY: fchdir(2) on that descriptor.
        check(unsafe { libc::fchdir(self.dir_fd) })?;
        match self.ids {
            Some((uid, gid)) => super::stage::set_ids(uid, gid),
            None => Ok(()),
        }
    }
}
