//! The seccomp filter every command run in an isolated sandbox gets: it refuses the system
//! calls that widen the kernel surface a tenant can reach (keys, BPF, `userfaultfd`,
//! performance counters, `kexec`, modules, tracing, other processes' memory) and the creation
//! of new user namespaces, and answers `clone3` with `ENOSYS` so the C library falls back to
//! `clone`, whose flags the filter can read. Everything else is allowed.

use std::io;

/// What a refused call returns: `EPERM`, as if the caller lacked the privilege.
const DENY: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const NO_SYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Calls refused outright.
const DENIED: &[libc::c_long] = &[
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_perf_event_open,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_pivot_root,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
];

/// Calls whose first argument holds namespace flags: refused with `CLONE_NEWUSER`.
const NS_FLAG_CALLS: &[libc::c_long] = &[libc::SYS_clone, libc::SYS_unshare];

// Offsets into `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LOW: u32 = 16;

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

const LD_W_ABS: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const JEQ_K: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const JGE_K: u32 = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
const JSET_K: u32 = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;
const RET_K: u32 = libc::BPF_RET | libc::BPF_K;

/// A compiled filter, built once and installed in each command between fork and exec.
#[derive(Debug, Clone)]
pub struct Filter {
    program: Vec<libc::sock_filter>,
}

impl Default for Filter {
    fn default() -> Self {
        Self::new()
    }
}

impl Filter {
    pub fn new() -> Self {
        let mut p = vec![
            stmt(LD_W_ABS, ARCH),
            // A foreign calling convention (32-bit entry points) is refused whole.
            jump(JEQ_K, AUDIT_ARCH, 1, 0),
            stmt(RET_K, DENY),
            stmt(LD_W_ABS, NR),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            // The x32 ABI numbers its calls from 0x4000_0000.
            p.push(jump(JGE_K, 0x4000_0000, 0, 1));
            p.push(stmt(RET_K, DENY));
        }
        for &nr in DENIED {
            p.push(jump(JEQ_K, nr as u32, 0, 1));
            p.push(stmt(RET_K, DENY));
        }
        p.push(jump(JEQ_K, libc::SYS_clone3 as u32, 0, 1));
        p.push(stmt(RET_K, NO_SYS));
        for &nr in NS_FLAG_CALLS {
            p.push(jump(JEQ_K, nr as u32, 0, 4));
            p.push(stmt(LD_W_ABS, ARG0_LOW));
            p.push(jump(JSET_K, libc::CLONE_NEWUSER as u32, 0, 1));
            p.push(stmt(RET_K, DENY));
            // Not refused: reload the number for the checks that follow.
            p.push(stmt(LD_W_ABS, NR));
        }
        p.push(stmt(RET_K, ALLOW));
        Filter { program: p }
    }

    /// Installs the filter on the calling thread. Needs `no_new_privs` set first; runs between
    /// fork and exec, so it makes one async-signal-safe call.
    pub fn install(&self) -> io::Result<()> {
        let prog = libc::sock_fprog {
            len: self.program.len() as u16,
            filter: self.program.as_ptr().cast_mut(),
        };
        // SAFETY: `prog` points at the filter's instructions, alive for the call; the kernel
        // copies them.
        let rc = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` in a forked child with the filter installed; the child's exit code.
    fn in_filtered_child(f: fn() -> i32) -> i32 {
        let filter = Filter::new();
        // SAFETY: the child only makes raw system calls before `_exit`.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                if super::super::isolation::no_new_privs().is_err() || filter.install().is_err() {
                    libc::_exit(100);
                }
                libc::_exit(f());
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            libc::WEXITSTATUS(status)
        }
    }

    fn errno() -> i32 {
        io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    #[test]
    fn refused_calls_fail_with_eperm_and_others_pass() {
        let code = in_filtered_child(|| {
            // SAFETY: raw calls with no pointers the kernel may write through.
            unsafe {
                if libc::syscall(libc::SYS_keyctl, 0, 0, 0, 0, 0) != -1 || errno() != libc::EPERM {
                    return 1;
                }
                if libc::unshare(libc::CLONE_NEWUSER) != -1 || errno() != libc::EPERM {
                    return 2;
                }
                if libc::syscall(libc::SYS_ptrace, libc::PTRACE_TRACEME, 0, 0, 0) != -1 {
                    return 3;
                }
                if libc::syscall(libc::SYS_clone3, 0, 0) != -1 || errno() != libc::ENOSYS {
                    return 4;
                }
                if libc::getpid() <= 0 {
                    return 5;
                }
                let pid = libc::fork();
                if pid == 0 {
                    libc::_exit(0);
                }
                if pid < 0 {
                    return 6;
                }
            }
            0
        });
        assert_eq!(code, 0);
    }
}
