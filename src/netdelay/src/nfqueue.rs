//! A netfilter queue socket (`NETLINK_NETFILTER`, subsystem `NFNL_SUBSYS_QUEUE`):
//! bind queues, receive the ids of the packets an `iptables … -j NFQUEUE`
//! rule hands over, and send verdicts for them.
//!
//! Only metadata is copied (`NFQNL_COPY_META`): the kernel keeps each packet
//! and the delay line only decides when it may leave. The message layouts
//! are those of `linux/netfilter/nfnetlink_queue.h`: a `nlmsghdr` (16
//! bytes, host order), a `nfgenmsg` (family, version, queue number in
//! network order), then attributes (`nlattr`: length and type, u16 each,
//! host order; payload padded to 4 bytes; the payloads in network order).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::DelayError;

const NETLINK_NETFILTER: libc::c_int = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQNL_MSG_VERDICT_BATCH: u16 = 3;

const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;

const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NFQA_CFG_F_GSO: u32 = 1 << 2;

const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;

const NLMSG_HDRLEN: usize = 16;
const NFGEN_HDRLEN: usize = 4;

/// What the kernel says about a queued packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    pub queue: u16,
    pub id: u32,
}

/// One netlink socket, bound to the queues it was asked for.
pub struct NfQueue {
    fd: OwnedFd,
    seq: u32,
    /// Verdict messages gathered by [`NfQueue::accept_upto`] and
    /// [`NfQueue::drop_one`], sent together by [`NfQueue::flush`].
    out: Vec<u8>,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Appends a netlink message header; returns where it starts, for
/// [`finish_msg`] to write its length.
fn start_msg(buf: &mut Vec<u8>, kind: u16, flags: u16, seq: u32, queue: u16) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | kind).to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.push(libc::AF_UNSPEC as u8);
    buf.push(0); // NFNETLINK_V0
    buf.extend_from_slice(&queue.to_be_bytes());
    at
}

fn put_attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(align4(buf.len()), 0);
}

fn finish_msg(buf: &mut [u8], at: usize) {
    let len = (buf.len() - at) as u32;
    buf[at..at + 4].copy_from_slice(&len.to_ne_bytes());
}

fn verdict_payload(verdict: u32, id: u32) -> [u8; 8] {
    let mut p = [0u8; 8];
    p[..4].copy_from_slice(&verdict.to_be_bytes());
    p[4..].copy_from_slice(&id.to_be_bytes());
    p
}

impl NfQueue {
    /// A socket with a large receive buffer that never reports `ENOBUFS`
    /// (a packet whose message does not fit is dropped by the kernel, as an
    /// overflowing link would).
    pub fn open() -> Result<NfQueue, DelayError> {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if raw < 0 {
            return Err(DelayError::os("socket(AF_NETLINK, NETLINK_NETFILTER)"));
        }
        // SAFETY: `raw` is a descriptor this process just opened.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an all-zero sockaddr_nl is valid; the kernel picks the port id.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `addr` is a sockaddr_nl of the size given.
        let rc = unsafe {
            libc::bind(
                raw,
                &addr as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(DelayError::os("bind(netlink)"));
        }
        set_int_opt(
            raw,
            libc::SOL_NETLINK,
            libc::NETLINK_NO_ENOBUFS,
            1,
            "NETLINK_NO_ENOBUFS",
        )?;
        // Root may go past rmem_max; anyone else keeps the default buffer.
        let _ = set_int_opt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            16 << 20,
            "SO_RCVBUFFORCE",
        );
        Ok(NfQueue {
            fd,
            seq: 0,
            out: Vec::new(),
        })
    }

    /// Binds queue `queue`: metadata only, at most `max_len` packets held
    /// (beyond which the kernel drops, as a full link buffer), and GSO
    /// packets whole when `whole_gso` (else the kernel segments them, so
    /// that a loss is one wire packet).
    pub fn bind(&mut self, queue: u16, max_len: u32, whole_gso: bool) -> Result<(), DelayError> {
        self.seq += 1;
        let mut buf = Vec::with_capacity(96);
        let at = start_msg(
            &mut buf,
            NFQNL_MSG_CONFIG,
            (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16,
            self.seq,
            queue,
        );
        // nfqnl_msg_config_cmd: command, padding, protocol family (any).
        put_attr(&mut buf, NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, 0]);
        // nfqnl_msg_config_params: copy range (u32), copy mode (u8), packed.
        let mut params = [0u8; 5];
        params[4] = NFQNL_COPY_META;
        put_attr(&mut buf, NFQA_CFG_PARAMS, &params);
        put_attr(&mut buf, NFQA_CFG_QUEUE_MAXLEN, &max_len.to_be_bytes());
        put_attr(&mut buf, NFQA_CFG_MASK, &NFQA_CFG_F_GSO.to_be_bytes());
        let flags = if whole_gso { NFQA_CFG_F_GSO } else { 0 };
        put_attr(&mut buf, NFQA_CFG_FLAGS, &flags.to_be_bytes());
        finish_msg(&mut buf, at);
        self.send(&buf)?;
        self.wait_ack(self.seq, &format!("binding queue {queue}"))
    }

    fn send(&self, buf: &[u8]) -> Result<(), DelayError> {
        // SAFETY: an all-zero sockaddr_nl addresses the kernel.
        let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `buf` and `to` are valid for the lengths given.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                0,
                &to as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(DelayError::os("sendto(netlink)"));
        }
        Ok(())
    }

    /// Reads until the kernel's answer to message `seq`; packets that
    /// arrive meanwhile are not expected (this runs before the rules send
    /// any) and are left to the kernel's fate when the queue is read.
    fn wait_ack(&mut self, seq: u32, what: &str) -> Result<(), DelayError> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = self.recv_raw(&mut buf, true)?.unwrap_or(0);
            let mut at = 0;
            while at + NLMSG_HDRLEN <= n {
                let len = u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
                let kind = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().unwrap());
                let mseq = u32::from_ne_bytes(buf[at + 8..at + 12].try_into().unwrap());
                if len < NLMSG_HDRLEN || at + len > n {
                    break;
                }
                if kind == libc::NLMSG_ERROR as u16 && mseq == seq && len >= NLMSG_HDRLEN + 4 {
                    let err = i32::from_ne_bytes(buf[at + 16..at + 20].try_into().unwrap());
                    if err == 0 {
                        return Ok(());
                    }
                    return Err(DelayError::Refused {
                        what: what.to_string(),
                        source: std::io::Error::from_raw_os_error(-err),
                    });
                }
                at += align4(len);
            }
        }
    }

    /// One datagram into `buf`; `None` when nothing is waiting and
    /// `block` is false.
    fn recv_raw(&self, buf: &mut [u8], block: bool) -> Result<Option<usize>, DelayError> {
        let flags = if block { 0 } else { libc::MSG_DONTWAIT };
        loop {
            // SAFETY: `buf` is valid for writes of its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    flags,
                )
            };
            if n >= 0 {
                return Ok(Some(n as usize));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(None),
                // Messages the socket could not take were dropped by the
                // kernel with their packets; the socket itself is fine.
                Some(libc::ENOBUFS) => continue,
                _ => {
                    return Err(DelayError::Io {
                        what: "recv(netlink)",
                        source: e,
                    });
                }
            }
        }
    }

    /// Every packet notice waiting on the socket, without blocking, given
    /// to `each`.
    pub fn drain(&self, buf: &mut [u8], mut each: impl FnMut(Queued)) -> Result<(), DelayError> {
        while let Some(n) = self.recv_raw(buf, false)? {
            parse_packets(&buf[..n], &mut each);
        }
        Ok(())
    }

    /// Queues the verdict "accept every packet of `queue` up to `id`"
    /// (the kernel's ids grow by one per packet and queue).
    pub fn accept_upto(&mut self, queue: u16, id: u32) {
        self.verdict(NFQNL_MSG_VERDICT_BATCH, queue, NF_ACCEPT, id);
    }

    /// Queues the verdict "drop packet `id` of `queue`".
    pub fn drop_one(&mut self, queue: u16, id: u32) {
        self.verdict(NFQNL_MSG_VERDICT, queue, NF_DROP, id);
    }

    fn verdict(&mut self, kind: u16, queue: u16, verdict: u32, id: u32) {
        self.seq += 1;
        let at = start_msg(
            &mut self.out,
            kind,
            libc::NLM_F_REQUEST as u16,
            self.seq,
            queue,
        );
        put_attr(
            &mut self.out,
            NFQA_VERDICT_HDR,
            &verdict_payload(verdict, id),
        );
        finish_msg(&mut self.out, at);
    }

    /// Sends the verdicts gathered since the last flush, in one datagram.
    pub fn flush(&mut self) -> Result<(), DelayError> {
        if self.out.is_empty() {
            return Ok(());
        }
        let r = self.send(&self.out);
        self.out.clear();
        r
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn set_int_opt(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
    what: &'static str,
) -> Result<(), DelayError> {
    // SAFETY: `v` is a c_int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(DelayError::os(what));
    }
    Ok(())
}

/// The packet notices of one datagram (other messages are skipped).
pub fn parse_packets(buf: &[u8], each: &mut impl FnMut(Queued)) {
    let mut at = 0;
    while at + NLMSG_HDRLEN + NFGEN_HDRLEN <= buf.len() {
        let len = u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().unwrap());
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            return;
        }
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET && len >= NLMSG_HDRLEN + NFGEN_HDRLEN
        {
            let g = at + NLMSG_HDRLEN;
            let queue = u16::from_be_bytes([buf[g + 2], buf[g + 3]]);
            let mut a = g + NFGEN_HDRLEN;
            while a + 4 <= at + len {
                let alen = u16::from_ne_bytes([buf[a], buf[a + 1]]) as usize;
                // The top two bits are the nested / byte-order flags.
                let akind = u16::from_ne_bytes([buf[a + 2], buf[a + 3]]) & 0x3fff;
                if alen < 4 || a + alen > at + len {
                    break;
                }
                if akind == NFQA_PACKET_HDR && alen >= 8 {
                    let id = u32::from_be_bytes(buf[a + 4..a + 8].try_into().unwrap());
                    each(Queued { queue, id });
                    break;
                }
                a += align4(alen);
            }
        }
        at += align4(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet_msg(queue: u16, id: u32) -> Vec<u8> {
        let mut b = Vec::new();
        let at = start_msg(&mut b, NFQNL_MSG_PACKET, 0, 0, queue);
        // nfqnl_msg_packet_hdr: id, hw protocol, hook (7 bytes, padded).
        let mut hdr = id.to_be_bytes().to_vec();
        hdr.extend_from_slice(&[0x08, 0x00, 4]);
        put_attr(&mut b, 0x8000 | 9, &[1, 2, 3, 4]); // some other attribute first
        put_attr(&mut b, NFQA_PACKET_HDR, &hdr);
        finish_msg(&mut b, at);
        b
    }

    #[test]
    fn parses_every_packet_of_a_datagram() {
        let mut d = packet_msg(3, 41);
        d.extend(packet_msg(3, 42));
        d.extend(packet_msg(7, 1));
        let mut got = vec![];
        parse_packets(&d, &mut |q| got.push(q));
        assert_eq!(
            got,
            vec![
                Queued { queue: 3, id: 41 },
                Queued { queue: 3, id: 42 },
                Queued { queue: 7, id: 1 }
            ]
        );
    }

    #[test]
    fn truncated_or_foreign_messages_yield_nothing_wrong() {
        let d = packet_msg(3, 41);
        for cut in 0..d.len() {
            let mut got = vec![];
            parse_packets(&d[..cut], &mut |q| got.push(q));
            assert!(got.is_empty(), "a message cut at {cut} bytes gave {got:?}");
        }
        let mut other = d.clone();
        other[4] = 2; // NLMSG_ERROR, not a packet
        other[5] = 0;
        let mut got = vec![];
        parse_packets(&other, &mut |q| got.push(q));
        assert!(got.is_empty());
    }

    #[test]
    fn a_verdict_message_is_laid_out_as_the_kernel_reads_it() {
        let mut q = Vec::new();
        let at = start_msg(&mut q, NFQNL_MSG_VERDICT_BATCH, 1, 9, 0x0102);
        put_attr(
            &mut q,
            NFQA_VERDICT_HDR,
            &verdict_payload(NF_ACCEPT, 0x0a0b0c0d),
        );
        finish_msg(&mut q, at);
        assert_eq!(q.len(), 16 + 4 + 4 + 8);
        assert_eq!(u32::from_ne_bytes(q[0..4].try_into().unwrap()), 32);
        assert_eq!(u16::from_ne_bytes(q[4..6].try_into().unwrap()), 0x0303);
        assert_eq!(&q[16..20], &[0, 0, 1, 2]);
        assert_eq!(u16::from_ne_bytes(q[20..22].try_into().unwrap()), 12);
        assert_eq!(&q[24..32], &[0, 0, 0, 1, 0x0a, 0x0b, 0x0c, 0x0d]);
    }
}
