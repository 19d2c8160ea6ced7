//! A DNS server on a loopback UDP port answering SRV questions.

use std::sync::atomic::Ordering;
use std::time::Duration;

/// A DNS server on a loopback UDP port that answers every SRV question with the current
/// records (`(target, port)`, priority 10, weight 5) and every other question with none.
pub struct SrvDns {
    pub addr: std::net::SocketAddr,
    records: std::sync::Arc<std::sync::Mutex<Vec<(String, u16)>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SrvDns {
    pub fn start(records: Vec<(String, u16)>) -> SrvDns {
        use std::sync::atomic::AtomicBool;
        use std::sync::{Arc, Mutex};
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let records = Arc::new(Mutex::new(records));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (records.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while !s.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let current = r.lock().unwrap().clone();
                if let Some(reply) = dns_answer(&buf[..n], &current) {
                    let _ = sock.send_to(&reply, from);
                }
            }
        });
        SrvDns {
            addr,
            records,
            stop,
            thread: Some(thread),
        }
    }

    pub fn set(&self, records: Vec<(String, u16)>) {
        *self.records.lock().unwrap() = records;
    }
}

impl Drop for SrvDns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The response to the DNS query `q` (RFC 1035 wire format), or `None` for garbage.
fn dns_answer(q: &[u8], records: &[(String, u16)]) -> Option<Vec<u8>> {
    const SRV: u16 = 33;
    if q.len() < 12 {
        return None;
    }
    let mut i = 12;
    while *q.get(i)? != 0 {
        i += 1 + q[i] as usize;
    }
    let question_end = i + 5;
    let qtype = u16::from_be_bytes([*q.get(i + 1)?, *q.get(i + 2)?]);
    if question_end > q.len() {
        return None;
    }
    let answers: &[(String, u16)] = if qtype == SRV { records } else { &[] };
    let mut r = Vec::with_capacity(512);
    r.extend_from_slice(&q[..2]);
    // QR, AA and the query's RD; RA; NOERROR.
    r.push(0x84 | (q[2] & 0x01));
    r.push(0x80);
    r.extend_from_slice(&1u16.to_be_bytes());
    r.extend_from_slice(&(answers.len() as u16).to_be_bytes());
    r.extend_from_slice(&[0, 0, 0, 0]);
    r.extend_from_slice(&q[12..question_end]);
    for (target, port) in answers {
        let mut rdata = Vec::new();
        rdata.extend_from_slice(&10u16.to_be_bytes());
        rdata.extend_from_slice(&5u16.to_be_bytes());
        rdata.extend_from_slice(&port.to_be_bytes());
        for label in target.trim_end_matches('.').split('.') {
            rdata.push(label.len() as u8);
            rdata.extend_from_slice(label.as_bytes());
        }
        rdata.push(0);
        // The owner name points back at the question's name (offset 12).
        r.extend_from_slice(&[0xc0, 0x0c]);
        r.extend_from_slice(&SRV.to_be_bytes());
        r.extend_from_slice(&1u16.to_be_bytes());
        r.extend_from_slice(&1u32.to_be_bytes());
        r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        r.extend_from_slice(&rdata);
    }
    Some(r)
}
