//! Address policy of the SSRF-guarded fetcher: which hosts a URL may name and which IP
//! addresses may be dialled. Decisions are made on the host the `url` crate parsed, never
//! on the URL string (WHATWG already turns `0x7f.1` or `2130706433` into `127.0.0.1`), and
//! a single blocked address refuses the whole fetch. `PERPLEXITY_FETCH_ALLOW_PRIVATE`
//! lifts only the address check here; scheme and credential rules always apply.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use url::{Host, Url};

const UNSPECIFIED: &str = "unspecified";
const LOOPBACK: &str = "loopback";
const PRIVATE: &str = "private";
const LINK_LOCAL_V4: &str = "link-local (includes cloud metadata 169.254.169.254)";
const CGNAT: &str = "carrier-grade NAT";
const DOCUMENTATION: &str = "documentation";
const BENCHMARKING: &str = "benchmarking";
const MULTICAST: &str = "multicast";
const IETF: &str = "reserved (IETF protocol assignments)";
const RESERVED: &str = "reserved";
const BROADCAST: &str = "broadcast";
const SIX_TO_FOUR_RELAY: &str = "6to4 relay anycast (deprecated)";
const IPV4_COMPATIBLE: &str = "IPv4-compatible (deprecated; embeds an IPv4 address)";
const NAT64: &str = "NAT64 (embeds an IPv4 address)";
const SIX_TO_FOUR: &str = "6to4 (embeds an IPv4 address)";
const TEREDO: &str = "Teredo (embeds an IPv4 address)";
const DISCARD: &str = "discard-only";
const UNIQUE_LOCAL: &str = "unique-local";
const LINK_LOCAL_V6: &str = "link-local";
const SITE_LOCAL: &str = "site-local (deprecated)";
const NOT_GLOBAL_UNICAST: &str = "not global unicast";

/// IPv4 networks that are never public, as `(network, prefix length, label)`. First match
/// wins, so a more specific entry must precede the one containing it.
const V4_BLOCKED: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, UNSPECIFIED),
    (Ipv4Addr::new(10, 0, 0, 0), 8, PRIVATE),
    (Ipv4Addr::new(100, 64, 0, 0), 10, CGNAT),
    (Ipv4Addr::new(127, 0, 0, 0), 8, LOOPBACK),
    (Ipv4Addr::new(169, 254, 0, 0), 16, LINK_LOCAL_V4),
    (Ipv4Addr::new(172, 16, 0, 0), 12, PRIVATE),
    (Ipv4Addr::new(192, 0, 0, 0), 24, IETF),
    (Ipv4Addr::new(192, 0, 2, 0), 24, DOCUMENTATION),
    (Ipv4Addr::new(192, 88, 99, 0), 24, SIX_TO_FOUR_RELAY),
    (Ipv4Addr::new(192, 168, 0, 0), 16, PRIVATE),
    (Ipv4Addr::new(198, 18, 0, 0), 15, BENCHMARKING),
    (Ipv4Addr::new(198, 51, 100, 0), 24, DOCUMENTATION),
    (Ipv4Addr::new(203, 0, 113, 0), 24, DOCUMENTATION),
    (Ipv4Addr::new(224, 0, 0, 0), 4, MULTICAST),
    (Ipv4Addr::new(255, 255, 255, 255), 32, BROADCAST),
    (Ipv4Addr::new(240, 0, 0, 0), 4, RESERVED),
];

/// IPv6 networks that are never public (first match wins). Anything not listed is public
/// only inside 2000::/3 (global unicast); IPv4-mapped addresses never get here, they are
/// canonicalised to IPv4 first.
const V6_BLOCKED: &[(Ipv6Addr, u8, &str)] = &[
    (Ipv6Addr::UNSPECIFIED, 128, UNSPECIFIED),
    (Ipv6Addr::LOCALHOST, 128, LOOPBACK),
    // `::a.b.c.d`: deprecated, no resolver should return it; refused whatever it embeds.
    (net6(0, 0, 0), 96, IPV4_COMPATIBLE),
    (net6(0x64, 0xff9b, 0), 96, NAT64),
    (net6(0x64, 0xff9b, 1), 48, NAT64),
    (net6(0x100, 0, 0), 64, DISCARD),
    (net6(0xfc00, 0, 0), 7, UNIQUE_LOCAL),
    (net6(0xfe80, 0, 0), 10, LINK_LOCAL_V6),
    (net6(0xfec0, 0, 0), 10, SITE_LOCAL),
    (net6(0xff00, 0, 0), 8, MULTICAST),
    // Inside 2000::/3. Teredo precedes the 2001::/23 block holding it, for its own label.
    (net6(0x2001, 0, 0), 32, TEREDO),
    (net6(0x2001, 0xdb8, 0), 32, DOCUMENTATION),
    (net6(0x2001, 0, 0), 23, IETF),
    (net6(0x2002, 0, 0), 16, SIX_TO_FOUR),
    (net6(0x3fff, 0, 0), 20, DOCUMENTATION),
];

/// Global unicast, the only IPv6 space that can be public.
const V6_GLOBAL_UNICAST: (Ipv6Addr, u8) = (net6(0x2000, 0, 0), 3);

/// A network address given by its first three segments (all the table needs).
const fn net6(s0: u16, s1: u16, s2: u16) -> Ipv6Addr {
    Ipv6Addr::new(s0, s1, s2, 0, 0, 0, 0, 0)
}

fn mask_v4(prefix_len: u8) -> u32 {
    // A shift by the full width is None: /0 masks nothing.
    u32::MAX
        .checked_shl(32 - u32::from(prefix_len))
        .unwrap_or(0)
}

fn mask_v6(prefix_len: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix_len))
        .unwrap_or(0)
}

fn in_v4(ip: Ipv4Addr, net: Ipv4Addr, prefix_len: u8) -> bool {
    ip.to_bits() & mask_v4(prefix_len) == net.to_bits()
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, prefix_len: u8) -> bool {
    ip.to_bits() & mask_v6(prefix_len) == net.to_bits()
}

/// The class of address that makes `ip` non-public, as a short label for error messages;
/// `None` when it is public. IPv4-mapped IPv6 (`::ffff:a.b.c.d`) is judged as IPv4; the
/// other forms embedding IPv4 (`::a.b.c.d`, NAT64, 6to4, Teredo) are never public.
pub fn why_not_public(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => V4_BLOCKED
            .iter()
            .find(|(net, len, _)| in_v4(v4, *net, *len))
            .map(|(_, _, label)| *label),
        IpAddr::V6(v6) => {
            let listed = V6_BLOCKED
                .iter()
                .find(|(net, len, _)| in_v6(v6, *net, *len))
                .map(|(_, _, label)| *label);
            let (global, global_len) = V6_GLOBAL_UNICAST;
            listed.or_else(|| (!in_v6(v6, global, global_len)).then_some(NOT_GLOBAL_UNICAST))
        }
    }
}

/// An IP network (`10.0.0.0/8`, `fd00::/8`) with no host bits set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix_len: u8,
}

impl Cidr {
    /// Refuses a prefix longer than the address and host bits below the prefix: in
    /// security configuration `10.0.0.1/8` is more likely a typo than a meant `10.0.0.0/8`.
    pub fn new(network: IpAddr, prefix_len: u8) -> Result<Cidr, String> {
        let fixed = match network {
            IpAddr::V4(v4) if prefix_len <= 32 => {
                IpAddr::V4(Ipv4Addr::from_bits(v4.to_bits() & mask_v4(prefix_len)))
            }
            IpAddr::V6(v6) if prefix_len <= 128 => {
                IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & mask_v6(prefix_len)))
            }
            _ => {
                return Err(format!(
                    "{network}/{prefix_len}: the prefix length is too long"
                ));
            }
        };
        // Host bits set: the network without them differs.
        if fixed != network {
            return Err(format!(
                "{network}/{prefix_len} has host bits set (did you mean {fixed}/{prefix_len}?)"
            ));
        }
        // Addresses are canonicalised before matching, so a network written in the
        // IPv4-mapped form would silently never match: ask for the IPv4 form instead.
        if let IpAddr::V6(v6) = network
            && prefix_len >= 96
            && let Some(v4) = v6.to_ipv4_mapped()
        {
            return Err(format!(
                "{network}/{prefix_len} is IPv4-mapped; write it as {v4}/{}",
                prefix_len - 96
            ));
        }
        Ok(Cidr {
            network,
            prefix_len,
        })
    }

    pub fn network(&self) -> IpAddr {
        self.network
    }

    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Exact-family match: an IPv4 network never contains an IPv6 address (callers
    /// canonicalise IPv4-mapped addresses first, as [`AllowPrivate::permits`] does).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => in_v4(ip, net, self.prefix_len),
            (IpAddr::V6(net), IpAddr::V6(ip)) => in_v6(ip, net, self.prefix_len),
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;

    /// `a.b.c.d/n`, `x:y::/n`, or a bare address (a /32 or /128 network).
    fn from_str(raw: &str) -> Result<Cidr, String> {
        let invalid = || {
            format!(
                "\"{raw}\" is not an IP address or CIDR network (expected e.g. 10.0.0.0/8, fd00::/8 or 127.0.0.2)"
            )
        };
        let (addr, prefix) = match raw.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (raw, None),
        };
        let network: IpAddr = addr.parse().map_err(|_| invalid())?;
        let prefix_len = match prefix {
            None if network.is_ipv4() => 32,
            None => 128,
            // Digits only: u8's parser would also take "+8".
            Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse().map_err(|_| invalid())?
            }
            Some(_) => return Err(invalid()),
        };
        Cidr::new(network, prefix_len)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

/// The `PERPLEXITY_FETCH_ALLOW_PRIVATE` override.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AllowPrivate {
    /// Only public addresses (the default).
    #[default]
    None,
    /// Every address (`true`): for tests against local servers and trusted networks.
    All,
    /// Public addresses plus these networks.
    Nets(Vec<Cidr>),
}

impl AllowPrivate {
    /// Whether the override admits `ip` (IPv4-mapped addresses are matched as IPv4).
    pub fn permits(&self, ip: IpAddr) -> bool {
        match self {
            AllowPrivate::None => false,
            AllowPrivate::All => true,
            AllowPrivate::Nets(nets) => {
                let ip = ip.to_canonical();
                nets.iter().any(|net| net.contains(ip))
            }
        }
    }

    /// The warning a server logs at start when the override is set, in the words it was
    /// set with (`true`, or the networks).
    pub fn warning(&self) -> Option<String> {
        match self {
            AllowPrivate::None => None,
            AllowPrivate::All => Some(
                "PERPLEXITY_FETCH_ALLOW_PRIVATE=true: the page fetcher may reach every address, loopback and private networks included".to_owned(),
            ),
            AllowPrivate::Nets(_) => Some(format!(
                "PERPLEXITY_FETCH_ALLOW_PRIVATE={self}: the page fetcher may reach these non-public networks"
            )),
        }
    }

    /// For the audit log: the override as displayed when one is set, `None` when only
    /// public addresses are allowed.
    pub fn lifted(&self) -> Option<String> {
        match self {
            AllowPrivate::None => None,
            other => Some(other.to_string()),
        }
    }
}

impl fmt::Display for AllowPrivate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowPrivate::None => f.write_str("none (public addresses only)"),
            AllowPrivate::All => f.write_str("all (every address allowed)"),
            AllowPrivate::Nets(nets) => {
                let nets: Vec<String> = nets.iter().map(Cidr::to_string).collect();
                f.write_str(&nets.join(", "))
            }
        }
    }
}

/// Parses `PERPLEXITY_FETCH_ALLOW_PRIVATE`: empty or `false`, `true`, or a comma-separated
/// list of networks. Any bad entry fails the whole value: a half-applied allowlist would
/// leave the operator guessing which networks are open.
pub fn parse_allow_private(raw: &str) -> Result<AllowPrivate, String> {
    let raw = raw.trim();
    if raw.is_empty() || raw.eq_ignore_ascii_case("false") {
        return Ok(AllowPrivate::None);
    }
    if raw.eq_ignore_ascii_case("true") {
        return Ok(AllowPrivate::All);
    }
    let problem = |why: String| {
        format!(
            "PERPLEXITY_FETCH_ALLOW_PRIVATE: {why}; expected true, false or a comma-separated \
             list of networks such as 10.0.0.0/8,fd00::/8"
        )
    };
    raw.split(',')
        .map(|entry| match entry.trim() {
            "" => Err(problem("empty entry in the list".to_owned())),
            entry => entry.parse::<Cidr>().map_err(problem),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(AllowPrivate::Nets)
}

/// An address the fetcher refused to dial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub ip: IpAddr,
    pub reason: &'static str,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is {}; fetching it is not allowed",
            self.ip, self.reason
        )
    }
}

impl std::error::Error for Blocked {}

/// The address check for one IP (a literal host, or each resolved address of a name).
pub fn check_addr(ip: IpAddr, allow: &AllowPrivate) -> Result<(), Blocked> {
    match why_not_public(ip) {
        Some(reason) if !allow.permits(ip) => Err(Blocked { ip, reason }),
        _ => Ok(()),
    }
}

/// What a URL asks the fetcher to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A literal: classified directly, never handed to a resolver.
    Ip(IpAddr),
    /// A DNS name, lowercased, without the trailing dot: resolve, then check every address.
    Name(String),
}

/// Checks scheme and credentials and extracts the host the parser settled on. Run it on
/// the first URL and on every redirect hop.
pub fn target_of(url: &Url) -> Result<Target, String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https URLs can be fetched (got {}:)",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("URLs with credentials (user:password@) cannot be fetched".to_owned());
    }
    match url.host() {
        Some(Host::Ipv4(v4)) => Ok(Target::Ip(IpAddr::V4(v4))),
        Some(Host::Ipv6(v6)) => Ok(Target::Ip(IpAddr::V6(v6))),
        Some(Host::Domain(domain)) => {
            let lower = domain.to_ascii_lowercase();
            let name = lower.strip_suffix('.').unwrap_or(&lower);
            if name.is_empty() || name.ends_with('.') {
                return Err(format!("the host \"{domain}\" is not a valid name"));
            }
            // The parser turns numeric hosts into Host::Ipv4; this is belt and braces so
            // that nothing address-like ever reaches a resolver as a name.
            match name.parse::<IpAddr>() {
                Ok(ip) => Ok(Target::Ip(ip)),
                Err(_) => Ok(Target::Name(name.to_owned())),
            }
        }
        None => Err("the URL has no host".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True when `ip` may be fetched without the private-address override.
    fn is_public(ip: IpAddr) -> bool {
        why_not_public(ip).is_none()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// `(address, public?, label when not public)`: every range's first and last address
    /// and the neighbours just outside it.
    const CASES: &[(&str, bool, &str)] = &[
        // 0.0.0.0/8
        ("0.0.0.0", false, "unspecified"),
        ("0.255.255.255", false, "unspecified"),
        ("1.0.0.0", true, ""),
        ("1.1.1.1", true, ""),
        ("8.8.8.8", true, ""),
        // 10.0.0.0/8
        ("9.255.255.255", true, ""),
        ("10.0.0.0", false, "private"),
        ("10.255.255.255", false, "private"),
        ("11.0.0.0", true, ""),
        // 100.64.0.0/10
        ("100.63.255.255", true, ""),
        ("100.64.0.0", false, "carrier-grade NAT"),
        ("100.127.255.255", false, "carrier-grade NAT"),
        ("100.128.0.0", true, ""),
        // 127.0.0.0/8
        ("126.255.255.255", true, ""),
        ("127.0.0.0", false, "loopback"),
        ("127.0.0.1", false, "loopback"),
        ("127.255.255.255", false, "loopback"),
        ("128.0.0.0", true, ""),
        // 169.254.0.0/16
        ("169.253.255.255", true, ""),
        ("169.254.0.0", false, LINK_LOCAL_V4),
        ("169.254.169.254", false, LINK_LOCAL_V4),
        ("169.254.255.255", false, LINK_LOCAL_V4),
        ("169.255.0.0", true, ""),
        // 172.16.0.0/12
        ("172.15.255.255", true, ""),
        ("172.16.0.0", false, "private"),
        ("172.31.255.255", false, "private"),
        ("172.32.0.0", true, ""),
        // 192.0.0.0/24 and 192.0.2.0/24
        ("191.255.255.255", true, ""),
        ("192.0.0.0", false, "reserved (IETF protocol assignments)"),
        ("192.0.0.255", false, "reserved (IETF protocol assignments)"),
        ("192.0.1.0", true, ""),
        ("192.0.1.255", true, ""),
        ("192.0.2.0", false, "documentation"),
        ("192.0.2.255", false, "documentation"),
        ("192.0.3.0", true, ""),
        // 192.88.99.0/24
        ("192.88.98.255", true, ""),
        ("192.88.99.0", false, "6to4 relay anycast (deprecated)"),
        ("192.88.99.255", false, "6to4 relay anycast (deprecated)"),
        ("192.88.100.0", true, ""),
        // 192.168.0.0/16
        ("192.167.255.255", true, ""),
        ("192.168.0.0", false, "private"),
        ("192.168.255.255", false, "private"),
        ("192.169.0.0", true, ""),
        ("192.169.0.1", true, ""),
        // 198.18.0.0/15
        ("198.17.255.255", true, ""),
        ("198.18.0.0", false, "benchmarking"),
        ("198.19.255.255", false, "benchmarking"),
        ("198.20.0.0", true, ""),
        // 198.51.100.0/24
        ("198.51.99.255", true, ""),
        ("198.51.100.0", false, "documentation"),
        ("198.51.100.255", false, "documentation"),
        ("198.51.101.0", true, ""),
        // 203.0.113.0/24
        ("203.0.112.255", true, ""),
        ("203.0.113.0", false, "documentation"),
        ("203.0.113.255", false, "documentation"),
        ("203.0.114.0", true, ""),
        ("93.184.215.14", true, ""),
        // 224.0.0.0/4, 240.0.0.0/4
        ("223.255.255.255", true, ""),
        ("224.0.0.0", false, "multicast"),
        ("224.0.0.1", false, "multicast"),
        ("239.255.255.255", false, "multicast"),
        ("240.0.0.0", false, "reserved"),
        ("255.255.255.254", false, "reserved"),
        ("255.255.255.255", false, "broadcast"),
        // IPv6 outside 2000::/3, and the embedded-IPv4 forms
        ("::", false, "unspecified"),
        ("::1", false, "loopback"),
        ("::2", false, IPV4_COMPATIBLE),
        ("::127.0.0.1", false, IPV4_COMPATIBLE),
        ("::8.8.8.8", false, IPV4_COMPATIBLE),
        ("::255.255.255.255", false, IPV4_COMPATIBLE),
        ("::1:0:0", false, "not global unicast"),
        ("::fffe:ffff:ffff", false, "not global unicast"),
        ("::ffff:0.0.0.0", false, "unspecified"),
        ("::ffff:127.0.0.1", false, "loopback"),
        ("::ffff:7f00:1", false, "loopback"),
        ("::ffff:169.254.169.254", false, LINK_LOCAL_V4),
        ("::ffff:8.8.8.8", true, ""),
        ("::ffff:255.255.255.255", false, "broadcast"),
        ("::1:0:0:0", false, "not global unicast"),
        ("::ffff:0:8.8.8.8", false, "not global unicast"),
        (
            "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "not global unicast",
        ),
        ("64:ff9b::", false, NAT64),
        ("64:ff9b::7f00:1", false, NAT64),
        ("64:ff9b::808:808", false, NAT64),
        ("64:ff9b::ffff:ffff", false, NAT64),
        ("64:ff9b::1:0:0", false, "not global unicast"),
        ("64:ff9b:1::", false, NAT64),
        ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", false, NAT64),
        ("64:ff9b:2::", false, "not global unicast"),
        ("100::", false, "discard-only"),
        ("100::ffff:ffff:ffff:ffff", false, "discard-only"),
        ("100:0:0:1::", false, "not global unicast"),
        // 2000::/3 and the blocks inside it
        (
            "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "not global unicast",
        ),
        ("2000::", true, ""),
        ("2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true, ""),
        ("2001::", false, TEREDO),
        ("2001:0:7f00:1::", false, TEREDO),
        ("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", false, TEREDO),
        ("2001:1::", false, "reserved (IETF protocol assignments)"),
        (
            "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "reserved (IETF protocol assignments)",
        ),
        ("2001:200::", true, ""),
        ("2001:4860:4860::8888", true, ""),
        ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", true, ""),
        ("2001:db8::", false, "documentation"),
        ("2001:db8::1", false, "documentation"),
        (
            "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "documentation",
        ),
        ("2001:db9::", true, ""),
        ("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true, ""),
        ("2002::", false, SIX_TO_FOUR),
        ("2002:7f00:1::", false, SIX_TO_FOUR),
        (
            "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            SIX_TO_FOUR,
        ),
        ("2003::", true, ""),
        ("2606:4700:4700::1111", true, ""),
        ("2a00:1450:4001::1", true, ""),
        ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true, ""),
        ("3fff::", false, "documentation"),
        (
            "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "documentation",
        ),
        ("3fff:1000::", true, ""),
        ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true, ""),
        ("4000::", false, "not global unicast"),
        ("e000::", false, "not global unicast"),
        (
            "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "not global unicast",
        ),
        ("fc00::", false, "unique-local"),
        ("fc00::1", false, "unique-local"),
        (
            "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "unique-local",
        ),
        ("fe00::", false, "not global unicast"),
        (
            "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "not global unicast",
        ),
        ("fe80::", false, "link-local"),
        ("fe80::1", false, "link-local"),
        (
            "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "link-local",
        ),
        ("fec0::", false, "site-local (deprecated)"),
        (
            "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "site-local (deprecated)",
        ),
        ("ff00::", false, "multicast"),
        ("ff02::1", false, "multicast"),
        (
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            false,
            "multicast",
        ),
    ];

    #[test]
    fn table_of_boundaries() {
        assert!(CASES.len() >= 80, "{} cases", CASES.len());
        for &(addr, public, label) in CASES {
            let a = ip(addr);
            assert_eq!(is_public(a), public, "{addr}");
            let want = (!public).then_some(label);
            assert_eq!(why_not_public(a), want, "{addr}");
        }
    }

    #[test]
    fn tables_are_well_formed() {
        for (net, len, _) in V4_BLOCKED {
            assert!(
                *len <= 32 && net.to_bits() & !mask_v4(*len) == 0,
                "{net}/{len}"
            );
        }
        for (net, len, _) in V6_BLOCKED {
            assert!(
                *len <= 128 && net.to_bits() & !mask_v6(*len) == 0,
                "{net}/{len}"
            );
        }
        assert_eq!(mask_v4(0), 0);
        assert_eq!(mask_v4(32), u32::MAX);
        assert_eq!(mask_v6(0), 0);
        assert_eq!(mask_v6(128), u128::MAX);
    }

    /// Deliberately naive second opinion, written from the reference by octet and
    /// segment patterns rather than masks, so a typo in either shows up as disagreement.
    fn naive_public_v4(ip: Ipv4Addr) -> bool {
        !matches!(
            ip.octets(),
            [0, ..]
                | [10, ..]
                | [100, 64..=127, ..]
                | [127, ..]
                | [169, 254, ..]
                | [172, 16..=31, ..]
                | [192, 0, 0, _]
                | [192, 0, 2, _]
                | [192, 88, 99, _]
                | [192, 168, ..]
                | [198, 18 | 19, ..]
                | [198, 51, 100, _]
                | [203, 0, 113, _]
                | [224..=255, ..]
        )
    }

    fn naive_public_v6(ip: Ipv6Addr) -> bool {
        if let Some(v4) = ip.to_ipv4_mapped() {
            return naive_public_v4(v4);
        }
        let s = ip.segments();
        let global_unicast = (0x2000..=0x3fff).contains(&s[0]);
        let ietf = s[0] == 0x2001 && s[1] <= 0x01ff; // 2001::/23, holds Teredo 2001::/32
        let doc = (s[0] == 0x2001 && s[1] == 0x0db8) || (s[0] == 0x3fff && s[1] <= 0x0fff);
        let six_to_four = s[0] == 0x2002;
        global_unicast && !ietf && !doc && !six_to_four
    }

    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Addresses near interesting points: a network's first or last address with a random
    /// number of low bits randomised, so samples land on both sides of each boundary.
    fn near_v4(rng: &mut XorShift) -> Ipv4Addr {
        let (net, len, _) = V4_BLOCKED[rng.below(V4_BLOCKED.len() as u64) as usize];
        let last = net.to_bits() | !mask_v4(len);
        let base = if rng.below(2) == 0 {
            net.to_bits()
        } else {
            last
        };
        let width = rng.below(33) as u32;
        let noise = (rng.next() as u32).checked_shr(32 - width).unwrap_or(0);
        // Step just outside the network sometimes.
        let nudge = match rng.below(3) {
            0 => base.wrapping_sub(1),
            1 => base.wrapping_add(1),
            _ => base,
        };
        Ipv4Addr::from_bits(nudge ^ noise)
    }

    fn near_v6(rng: &mut XorShift) -> Ipv6Addr {
        let (net, len, _) = V6_BLOCKED[rng.below(V6_BLOCKED.len() as u64) as usize];
        let last = net.to_bits() | !mask_v6(len);
        let base = if rng.below(2) == 0 {
            net.to_bits()
        } else {
            last
        };
        let width = rng.below(129) as u32;
        let random = (u128::from(rng.next()) << 64) | u128::from(rng.next());
        let noise = random.checked_shr(128 - width).unwrap_or(0);
        let nudge = match rng.below(3) {
            0 => base.wrapping_sub(1),
            1 => base.wrapping_add(1),
            _ => base,
        };
        Ipv6Addr::from_bits(nudge ^ noise)
    }

    #[test]
    fn agrees_with_naive_v4() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut blocked = 0;
        for i in 0..100_000 {
            let a = if i % 2 == 0 {
                Ipv4Addr::from_bits(rng.next() as u32)
            } else {
                near_v4(&mut rng)
            };
            let public = is_public(IpAddr::V4(a));
            assert_eq!(public, naive_public_v4(a), "{a}");
            // The IPv4-mapped form is judged exactly like the address it maps.
            let mapped = IpAddr::V6(a.to_ipv6_mapped());
            assert_eq!(why_not_public(mapped), why_not_public(IpAddr::V4(a)), "{a}");
            blocked += usize::from(!public);
        }
        // Both sides of the boundaries were exercised.
        assert!((20_000..80_000).contains(&blocked), "{blocked}");
    }

    #[test]
    fn agrees_with_naive_v6() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let mut public_count = 0;
        for i in 0..100_000 {
            let a = match i % 4 {
                0 => Ipv6Addr::from_bits((u128::from(rng.next()) << 64) | u128::from(rng.next())),
                // Inside 2000::/3, where the interesting holes are.
                1 => Ipv6Addr::from_bits(
                    (0x2000u128 << 112)
                        | (((u128::from(rng.next()) << 64) | u128::from(rng.next())) >> 3),
                ),
                2 => Ipv4Addr::from_bits(rng.next() as u32).to_ipv6_mapped(),
                _ => near_v6(&mut rng),
            };
            let public = is_public(IpAddr::V6(a));
            assert_eq!(public, naive_public_v6(a), "{a}");
            public_count += usize::from(public);
        }
        assert!((20_000..80_000).contains(&public_count), "{public_count}");
    }

    fn url_target(raw: &str) -> Result<Target, String> {
        target_of(&Url::parse(raw).unwrap())
    }

    #[test]
    fn obfuscated_and_private_literals_are_blocked() {
        let cases = [
            ("http://2130706433/", "127.0.0.1"),
            ("http://0x7f.1/", "127.0.0.1"),
            ("http://0177.0.0.1/", "127.0.0.1"),
            ("http://127.1/", "127.0.0.1"),
            ("http://0x7f000001/", "127.0.0.1"),
            ("http://127.0.0.1./", "127.0.0.1"),
            ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
            ("http://[::ffff:7f00:1]/", "::ffff:127.0.0.1"),
            ("http://[::1]/", "::1"),
            (
                "http://169.254.169.254/latest/meta-data/",
                "169.254.169.254",
            ),
            ("http://100.64.0.1/", "100.64.0.1"),
            ("http://192.0.2.10/", "192.0.2.10"),
            ("http://198.18.0.1/", "198.18.0.1"),
            ("http://[fe80::1]/", "fe80::1"),
            ("http://[fc00::1]/", "fc00::1"),
            ("http://[2001:db8::1]/", "2001:db8::1"),
            ("http://[64:ff9b::7f00:1]/", "64:ff9b::7f00:1"),
            ("http://[2002:7f00:1::]/", "2002:7f00:1::"),
            ("http://[2001:0:7f00:1::]/", "2001:0:7f00:1::"),
            ("http://0/", "0.0.0.0"),
            ("http://255.255.255.255/", "255.255.255.255"),
            ("https://224.0.0.1:8443/x", "224.0.0.1"),
        ];
        for (raw, want) in cases {
            let target = url_target(raw);
            assert_eq!(target, Ok(Target::Ip(ip(want))), "{raw}");
            let blocked = check_addr(ip(want), &AllowPrivate::None);
            assert!(blocked.is_err(), "{raw} was not blocked");
        }
    }

    #[test]
    fn public_literals_pass() {
        for a in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.215.14",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
        ] {
            assert_eq!(check_addr(ip(a), &AllowPrivate::None), Ok(()), "{a}");
        }
        assert_eq!(
            url_target("https://[2606:4700:4700::1111]/"),
            Ok(Target::Ip(ip("2606:4700:4700::1111")))
        );
    }

    #[test]
    fn credentials_are_refused() {
        for raw in [
            "http://user@evil@127.0.0.1/",
            "http://u:p@example.com/",
            "http://u@example.com/",
            "http://:p@example.com/",
        ] {
            let err = url_target(raw).unwrap_err();
            assert!(err.contains("credentials"), "{raw}: {err}");
        }
    }

    #[test]
    fn other_schemes_are_refused() {
        for (raw, scheme) in [
            ("file:///etc/passwd", "file"),
            ("gopher://127.0.0.1:25/", "gopher"),
            ("data:text/html,hi", "data"),
            ("ftp://x/", "ftp"),
            ("ws://example.com/", "ws"),
        ] {
            assert_eq!(
                url_target(raw),
                Err(format!(
                    "only http and https URLs can be fetched (got {scheme}:)"
                )),
                "{raw}"
            );
        }
    }

    #[test]
    fn names_are_normalised() {
        assert_eq!(
            url_target("http://localhost/"),
            Ok(Target::Name("localhost".into()))
        );
        assert_eq!(
            url_target("HTTP://EXAMPLE.COM./"),
            Ok(Target::Name("example.com".into()))
        );
        assert_eq!(
            url_target("https://Bücher.example/a?b"),
            Ok(Target::Name("xn--bcher-kva.example".into()))
        );
        assert!(url_target("http://example.com../").is_err());
        // What the resolver returns for localhost is refused by the address check.
        assert!(check_addr(ip("127.0.0.1"), &AllowPrivate::None).is_err());
    }

    #[test]
    fn blocked_message() {
        let err = check_addr(ip("169.254.169.254"), &AllowPrivate::None).unwrap_err();
        assert_eq!(err.reason, LINK_LOCAL_V4);
        assert_eq!(
            err.to_string(),
            "169.254.169.254 is link-local (includes cloud metadata 169.254.169.254); \
             fetching it is not allowed"
        );
        let err = check_addr(ip("::ffff:127.0.0.1"), &AllowPrivate::None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "::ffff:127.0.0.1 is loopback; fetching it is not allowed"
        );
    }

    #[test]
    fn parse_allow_private_values() {
        assert_eq!(parse_allow_private(""), Ok(AllowPrivate::None));
        assert_eq!(parse_allow_private("  "), Ok(AllowPrivate::None));
        assert_eq!(parse_allow_private("false"), Ok(AllowPrivate::None));
        assert_eq!(parse_allow_private("FALSE"), Ok(AllowPrivate::None));
        assert_eq!(parse_allow_private("true"), Ok(AllowPrivate::All));
        assert_eq!(parse_allow_private(" True "), Ok(AllowPrivate::All));

        let nets = parse_allow_private(" 127.0.0.2/32 , 10.0.0.0/8,::1/128, fd00::/8 ").unwrap();
        assert_eq!(
            nets.to_string(),
            "127.0.0.2/32, 10.0.0.0/8, ::1/128, fd00::/8"
        );

        let bare = parse_allow_private("192.168.1.5,fe80::1").unwrap();
        assert_eq!(
            bare,
            AllowPrivate::Nets(vec![
                Cidr::new(ip("192.168.1.5"), 32).unwrap(),
                Cidr::new(ip("fe80::1"), 128).unwrap(),
            ])
        );
        assert_eq!(
            parse_allow_private("0.0.0.0/0,::/0").unwrap().to_string(),
            "0.0.0.0/0, ::/0"
        );
        assert_eq!(
            AllowPrivate::None.to_string(),
            "none (public addresses only)"
        );
        assert_eq!(AllowPrivate::All.to_string(), "all (every address allowed)");
        assert_eq!(AllowPrivate::None.lifted(), None);
        assert_eq!(
            parse_allow_private("10.0.0.0/8").unwrap().lifted(),
            Some("10.0.0.0/8".to_owned())
        );
    }

    #[test]
    fn parse_allow_private_rejects() {
        let bad = [
            ("10.0.0.1/8", "did you mean 10.0.0.0/8?"),
            ("fd00::1/8", "did you mean fd00::/8?"),
            ("10.0.0.0/33", "too long"),
            ("::/129", "too long"),
            ("10.0.0.0/", "\"10.0.0.0/\""),
            ("10.0.0.0/+8", "\"10.0.0.0/+8\""),
            ("10.0.0.0/ 8", "\"10.0.0.0/ 8\""),
            ("10.0.0.0/0008", "\"10.0.0.0/0008\""),
            ("10.0.0.0/8/8", "\"10.0.0.0/8/8\""),
            ("localhost", "\"localhost\""),
            ("yes", "\"yes\""),
            ("1", "\"1\""),
            ("10.0.0", "\"10.0.0\""),
            ("010.0.0.0/8", "\"010.0.0.0/8\""),
            ("[::1]", "\"[::1]\""),
            ("fe80::1%eth0", "\"fe80::1%eth0\""),
            ("10.0.0.0/8,", "empty entry"),
            ("10.0.0.0/8,,::1", "empty entry"),
            ("true,10.0.0.0/8", "\"true\""),
            ("10.0.0.0/8,nope", "\"nope\""),
            ("::ffff:127.0.0.1", "write it as 127.0.0.1/32"),
            ("::ffff:10.0.0.0/104", "write it as 10.0.0.0/8"),
        ];
        for (raw, want) in bad {
            let err = parse_allow_private(raw).unwrap_err();
            assert!(err.contains(want), "{raw}: {err}");
            assert!(err.starts_with("PERPLEXITY_FETCH_ALLOW_PRIVATE: "), "{err}");
            assert!(err.contains("expected true, false or"), "{err}");
        }
    }

    #[test]
    fn permits_and_override() {
        let allow = parse_allow_private("127.0.0.0/8,fd00::/8").unwrap();
        assert!(allow.permits(ip("127.0.0.1")));
        assert!(allow.permits(ip("::ffff:127.0.0.1")));
        assert!(allow.permits(ip("fd12::1")));
        assert!(!allow.permits(ip("fc00::1")));
        assert!(!allow.permits(ip("10.0.0.1")));
        assert!(!allow.permits(ip("::1")));
        // The IPv4-compatible form is not canonicalised: it stays refused.
        assert!(!allow.permits(ip("::127.0.0.1")));

        assert_eq!(check_addr(ip("127.0.0.1"), &allow), Ok(()));
        assert_eq!(check_addr(ip("::ffff:127.0.0.5"), &allow), Ok(()));
        assert_eq!(
            check_addr(ip("10.0.0.1"), &allow),
            Err(Blocked {
                ip: ip("10.0.0.1"),
                reason: "private"
            })
        );
        assert_eq!(check_addr(ip("8.8.8.8"), &allow), Ok(()));

        assert!(AllowPrivate::All.permits(ip("169.254.169.254")));
        assert_eq!(
            check_addr(ip("169.254.169.254"), &AllowPrivate::All),
            Ok(())
        );
        assert!(!AllowPrivate::None.permits(ip("127.0.0.1")));

        let one = parse_allow_private("127.0.0.2").unwrap();
        assert!(one.permits(ip("127.0.0.2")));
        assert!(!one.permits(ip("127.0.0.1")));
        assert!(!one.permits(ip("127.0.0.3")));

        let everything_v6 = parse_allow_private("::/0").unwrap();
        assert!(everything_v6.permits(ip("fe80::1")));
        assert!(!everything_v6.permits(ip("127.0.0.1")));
    }
}
