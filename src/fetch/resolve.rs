//! Name resolution for the fetcher, behind a trait so tests can script answers (public,
//! then private; one of each) without touching real DNS.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;

pub type Lookup<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

pub trait Resolve: Send + Sync {
    /// Every address `host` resolves to.
    fn lookup<'a>(&'a self, host: &'a str, port: u16) -> Lookup<'a>;
}

/// The operating system's resolver (getaddrinfo on a blocking thread). The fetcher puts
/// the timeout around it.
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn lookup<'a>(&'a self, host: &'a str, port: u16) -> Lookup<'a> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, port)).await?;
            let mut ips: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            ips.dedup();
            Ok(ips)
        })
    }
}
