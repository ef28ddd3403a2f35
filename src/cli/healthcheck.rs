//! `perplexity-agent healthcheck`: exit 0 when the `serve --http` on this machine answers
//! `/healthz`, 1 when it does not. For a container's HEALTHCHECK (distroless has no curl):
//! it needs no key, no configuration and no runtime, so a probe every few seconds costs
//! a socket and nothing else.
//!
//! Touches: one loopback connection (`net::probe_health`), stderr.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use clap::Args;

use super::output::{CliError, Ended, Exit};

#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// The address `serve --http --bind` listens on (0.0.0.0 or [::] is probed on loopback).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    pub bind: String,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub timeout: u64,
}

pub fn run(args: &HealthcheckArgs) -> Ended {
    let addr = probe_address(&args.bind).map_err(|e| CliError::usage(&e))?;
    match crate::net::probe_health(addr, Duration::from_secs(args.timeout)) {
        Ok(()) => Ok(Exit::Success),
        Err(e) => Err(CliError::failed(format!("unhealthy: {e}"))),
    }
}

/// Where to knock: the listening address itself, or loopback when the server listens on
/// every interface. Anything else is another machine, which the probe never reaches.
fn probe_address(bind: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = bind.trim().parse().map_err(|_| {
        format!("--bind {bind:?} is not an IP address and port, such as 127.0.0.1:8080")
    })?;
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip if ip.is_loopback() => ip,
        ip => {
            return Err(format!(
                "--bind {ip} is not this machine's loopback: healthcheck probes the local server only (give the address serve --http listens on, or 127.0.0.1:PORT)"
            ));
        }
    };
    Ok(SocketAddr::new(ip, addr.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_loopback_only() {
        assert_eq!(
            probe_address("0.0.0.0:8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(probe_address("[::]:9").unwrap(), "[::1]:9".parse().unwrap());
        assert_eq!(
            probe_address(" 127.0.0.2:1 ").unwrap(),
            "127.0.0.2:1".parse().unwrap()
        );
        for bad in ["10.0.0.1:80", "[2001:db8::1]:80", "localhost:80", "8080"] {
            assert!(probe_address(bad).is_err(), "{bad}");
        }
    }
}
