//! What the standard library does not offer for the echo sockets: buffer sizes, CPU
//! pinning, a nanosecond `ppoll`, and batched `recvmmsg`/`sendmmsg`.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::NAME;
use crate::WorkloadError;

/// Socket buffer sizes asked for: room for a window of the largest messages, so a burst
/// of fragments is not dropped by a full receive buffer.
pub(crate) const SOCKET_BUFFER: libc::c_int = 8 << 20;

/// Datagrams one `recvmmsg`/`sendmmsg` call moves at most.
pub(crate) const BATCH: usize = 32;

/// A network error with what was being done.
pub(crate) fn net_error(context: impl Into<String>, source: io::Error) -> WorkloadError {
    WorkloadError::Net {
        workload: NAME,
        context: context.into(),
        source,
    }
}

/// Asks for [`SOCKET_BUFFER`]-byte send and receive buffers: forced beyond
/// `net.core.rmem_max` when allowed (root), as large as the limit allows otherwise.
pub(crate) fn grow_buffers(fd: RawFd) {
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        let size = SOCKET_BUFFER;
        let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let ptr = (&size as *const libc::c_int).cast::<libc::c_void>();
        // SAFETY: setsockopt reads one c_int from `ptr`, which points at `size`; a failure
        // leaves the socket as it was.
        unsafe {
            if libc::setsockopt(fd, libc::SOL_SOCKET, force, ptr, len) != 0 {
                libc::setsockopt(fd, libc::SOL_SOCKET, plain, ptr, len);
            }
        }
    }
}

/// The CPUs this thread may run on.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most `size_of::<cpu_set_t>()` bytes into `set`.
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if ok != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads the set within CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Which end of the allowed CPUs a poll-mode thread takes: the server the last, the
/// clients the first, so the two sides of `--role both` do not share a core when there
/// are two.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Core {
    First,
    Last,
}

/// Pins the calling thread to one CPU (best effort: without one, it stays where it may
/// run). Returns the CPU.
pub(crate) fn pin(core: Core) -> Option<usize> {
    let cpus = allowed_cpus();
    let cpu = match core {
        Core::First => cpus.first(),
        Core::Last => cpus.last(),
    }
    .copied()?;
    // SAFETY: as in `allowed_cpus`; sched_setaffinity reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return None;
        }
    }
    Some(cpu)
}

/// Waits until one of `fds` is ready or `timeout` passes (nanosecond resolution);
/// returns how many are ready. An interrupted wait counts as a timeout.
pub(crate) fn ppoll(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(3600) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    for fd in fds.iter_mut() {
        fd.revents = 0;
    }
    // SAFETY: `fds` is an exclusively borrowed slice of pollfd of that length; `ts` lives
    // for the call; no signal mask.
    let ready = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if ready < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(err);
    }
    Ok(ready as usize)
}

/// `BATCH` datagram buffers of `stride` bytes with their headers and peer addresses, for
/// `recvmmsg` and `sendmmsg`.
pub(crate) struct Mmsg {
    stride: usize,
    buf: Vec<u8>,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    addr: Vec<libc::sockaddr_storage>,
}

impl std::fmt::Debug for Mmsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mmsg")
            .field("stride", &self.stride)
            .finish_non_exhaustive()
    }
}

impl Mmsg {
    pub(crate) fn new(stride: usize) -> Mmsg {
        Mmsg {
            stride,
            buf: vec![0; stride * BATCH],
            iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                BATCH
            ],
            // SAFETY: mmsghdr and sockaddr_storage are plain data; all-zero is valid for
            // both (null pointers, zero lengths, family AF_UNSPEC).
            hdr: vec![unsafe { std::mem::zeroed() }; BATCH],
            // SAFETY: as above.
            addr: vec![unsafe { std::mem::zeroed() }; BATCH],
        }
    }

    /// Points every header at its buffer (of `lens[i]` bytes, or the whole stride) and,
    /// when `named`, at its address slot. The vectors never move once made, so the
    /// pointers stay valid until the next call.
    fn aim(&mut self, count: usize, lens: Option<&[usize]>, named: bool) {
        let base = self.buf.as_mut_ptr();
        for i in 0..count {
            // SAFETY: i < BATCH, so the offset stays inside `buf`.
            self.iov[i].iov_base = unsafe { base.add(i * self.stride) }.cast();
            self.iov[i].iov_len = lens.map_or(self.stride, |l| l[i]);
            let h = &mut self.hdr[i].msg_hdr;
            h.msg_iov = &mut self.iov[i];
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
            h.msg_flags = 0;
            if named {
                h.msg_name = (&mut self.addr[i] as *mut libc::sockaddr_storage).cast();
                // Sending back to where a datagram came from keeps the length the kernel
                // wrote on receipt.
                if lens.is_none() {
                    h.msg_namelen =
                        std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                }
            } else {
                h.msg_name = std::ptr::null_mut();
                h.msg_namelen = 0;
            }
        }
    }

    /// Receives up to `BATCH` datagrams; 0 when none is there. Without `wait`, it does
    /// not wait; with it (on a blocking socket) it waits for the first datagram, at most
    /// the socket's receive timeout, and takes what else is there with it
    /// (`MSG_WAITFORONE`): one system call per wake-up instead of a poll and a receive.
    pub(crate) fn recv(&mut self, fd: RawFd, named: bool, wait: bool) -> io::Result<usize> {
        self.aim(BATCH, None, named);
        // SAFETY: the headers point at buffers, iovecs and address slots owned by `self`,
        // each as long as its header says; the kernel writes within them.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdr.as_mut_ptr(),
                BATCH as libc::c_uint,
                if wait {
                    libc::MSG_WAITFORONE
                } else {
                    libc::MSG_DONTWAIT
                },
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(err),
            };
        }
        Ok(n as usize)
    }

    /// Datagram `i` as received.
    pub(crate) fn received(&self, i: usize) -> &[u8] {
        let len = (self.hdr[i].msg_len as usize).min(self.stride);
        &self.buf[i * self.stride..i * self.stride + len]
    }

    /// Slot `i`, to write a datagram into before [`Mmsg::send`].
    pub(crate) fn slot(&mut self, i: usize) -> &mut [u8] {
        &mut self.buf[i * self.stride..(i + 1) * self.stride]
    }

    /// Sends datagrams `from..count` (slot i holding `lens[i]` bytes; to the address
    /// received in it when `named`) without waiting; returns how many went (0 when the
    /// send buffer is full).
    pub(crate) fn send(
        &mut self,
        fd: RawFd,
        from: usize,
        count: usize,
        lens: &[usize],
        named: bool,
    ) -> io::Result<usize> {
        self.aim(count, Some(lens), named);
        if from >= count {
            return Ok(0);
        }
        // SAFETY: as in `recv`; the kernel reads the first `count - from` headers from
        // `from` on.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                self.hdr.as_mut_ptr().add(from),
                (count - from) as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(err),
            };
        }
        Ok(n as usize)
    }
}

/// The address length of datagram `i` as received (for tests of the batch).
#[cfg(test)]
impl Mmsg {
    pub(crate) fn name_len(&self, i: usize) -> libc::socklen_t {
        self.hdr[i].msg_hdr.msg_namelen
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn a_batch_is_received_and_echoed_to_each_sender() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(b"from a", server.local_addr().unwrap()).unwrap();
        b.send_to(b"from b!", server.local_addr().unwrap()).unwrap();
        let mut batch = Mmsg::new(64);
        let mut fds = [libc::pollfd {
            fd: server.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        ppoll(&mut fds, Duration::from_secs(5)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let n = batch.recv(server.as_raw_fd(), true, false).unwrap();
        assert_eq!(n, 2);
        assert_eq!(batch.received(0), b"from a");
        assert!(batch.name_len(0) > 0);
        let lens: Vec<usize> = (0..n).map(|i| batch.received(i).len()).collect();
        assert_eq!(
            batch.send(server.as_raw_fd(), 0, n, &lens, true).unwrap(),
            2
        );
        let mut buf = [0u8; 64];
        a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = a.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"from a");
        let n = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"from b!");
    }

    #[test]
    fn nothing_to_receive_is_zero_not_a_wait() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut batch = Mmsg::new(64);
        assert_eq!(batch.recv(server.as_raw_fd(), true, false).unwrap(), 0);
        // Waiting ends at the socket's receive timeout.
        server
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        assert_eq!(batch.recv(server.as_raw_fd(), true, true).unwrap(), 0);
        let mut fds = [libc::pollfd {
            fd: server.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        assert_eq!(ppoll(&mut fds, Duration::from_millis(5)).unwrap(), 0);
    }
}
