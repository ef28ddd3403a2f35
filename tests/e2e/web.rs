//! A scriptable web server on a loopback address, for the fetcher's tests: pages,
//! redirects, huge or endless or slow bodies, wrong content types. It counts every
//! connection, so a test can prove that nothing ever reached a blocked address.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Clone)]
pub enum Reply {
    /// Status, extra headers, body (sent with Content-Length).
    Page(u16, Vec<(String, String)>, Vec<u8>),
    /// A redirect to this location.
    Redirect(String),
    /// Headers only, claiming this Content-Length, then the connection is held open.
    Claims(u64),
    /// A chunked body of this content type that never ends.
    Endless(&'static str),
    /// One byte every `ms` milliseconds, forever.
    Drip(u64),
}

pub fn html(body: &str) -> Reply {
    Reply::Page(
        200,
        vec![("Content-Type".into(), "text/html; charset=utf-8".into())],
        body.as_bytes().to_vec(),
    )
}

pub fn typed(content_type: &str, body: &[u8]) -> Reply {
    Reply::Page(
        200,
        vec![("Content-Type".into(), content_type.into())],
        body.to_vec(),
    )
}

pub struct Web {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

impl Web {
    /// Serves `route(path)` on `ip` (a loopback address), port chosen by the OS, or the
    /// given one.
    pub fn start(
        ip: &str,
        port: u16,
        route: impl Fn(&str) -> Reply + Send + Sync + 'static,
    ) -> Web {
        let listener = TcpListener::bind((ip, port)).expect("bind a loopback test server");
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let route = Arc::new(route);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                count.fetch_add(1, Ordering::SeqCst);
                let route = route.clone();
                std::thread::spawn(move || serve(stream, &*route));
            }
        });
        Web { addr, connections }
    }

    /// A listener that only counts connections (a trap).
    pub fn trap(ip: &str, port: u16) -> Web {
        Web::start(ip, port, |_| Reply::Page(500, vec![], b"trap".to_vec()))
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

fn serve(stream: TcpStream, route: &dyn Fn(&str) -> Reply) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
    // Skip the headers.
    loop {
        let mut h = String::new();
        match reader.read_line(&mut h) {
            Ok(0) | Err(_) => return,
            Ok(_) if h == "\r\n" || h == "\n" => break,
            Ok(_) => {}
        }
    }
    let mut out = stream;
    match route(&path) {
        Reply::Page(status, headers, body) => {
            let mut head = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(&body);
        }
        Reply::Redirect(location) => {
            let _ = write!(
                out,
                "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
        Reply::Claims(length) => {
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {length}\r\n\r\n"
            );
            std::thread::sleep(Duration::from_secs(5));
        }
        Reply::Endless(content_type) => {
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
            );
            let chunk = "lorem ipsum dolor sit amet ".repeat(600);
            loop {
                if write!(out, "{:x}\r\n{chunk}\r\n", chunk.len()).is_err() {
                    return;
                }
            }
        }
        Reply::Drip(ms) => {
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
            );
            loop {
                if out.write_all(b"1\r\nx\r\n").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(ms));
            }
        }
    }
}
