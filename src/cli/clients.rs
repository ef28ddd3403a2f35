//! The MCP clients `install` writes entries for and `doctor` checks: each one's name,
//! config file on each platform, the key its servers sit under, the wait budget that
//! suits its tool-call timeout, and what to do once the entry is written.

use std::path::PathBuf;

use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    #[value(name = "vscode")]
    Vscode,
}

pub const CLIENTS: [Client; 4] = [
    Client::ClaudeDesktop,
    Client::ClaudeCode,
    Client::Cursor,
    Client::Vscode,
];

/// Which platform's file locations to use (a parameter so tests can ask for any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Unix,
    MacOs,
    Windows,
}

impl Platform {
    pub fn current() -> Platform {
        if cfg!(windows) {
            Platform::Windows
        } else if cfg!(target_os = "macos") {
            Platform::MacOs
        } else {
            Platform::Unix
        }
    }
}

impl Client {
    pub fn title(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
        }
    }

    /// The name on the command line.
    pub fn arg(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
        }
    }

    /// The wait budget written for each client, matched to how long it lets a tool
    /// call run. A run that outlasts the budget is not lost: the tool hands back a
    /// `response_id` to collect, so the budget only has to end before the client gives up.
    ///
    /// | Client         | Tool-call timeout                                  | Budget |
    /// |----------------|----------------------------------------------------|--------|
    /// | Claude Desktop | 60 s, fixed, no progress resets                    | 55     |
    /// | Cursor         | 60 s in its CLI/ACP agent; the IDE (~60 min) reads |        |
    /// |                | the same ~/.cursor/mcp.json, so the strictest wins | 55     |
    /// | Claude Code    | long, reset by progress notifications              | 300    |
    /// | VS Code        | none                                               | 300    |
    ///
    /// 55 leaves 5 s of a 60 s limit for the answer to travel back; 300 lets most runs
    /// finish within one call where the client would wait longer.
    pub fn wait_seconds(self) -> u64 {
        match self {
            Client::ClaudeDesktop | Client::Cursor => 55,
            Client::ClaudeCode | Client::Vscode => 300,
        }
    }

    /// Started from a desktop or dock rather than a shell, so it does not see the
    /// shell's environment: an entry without the key gets none.
    pub fn launched_outside_the_shell(self) -> bool {
        !matches!(self, Client::ClaudeCode)
    }

    /// Why, in a sentence for the report.
    pub fn wait_reason(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => {
                "Claude Desktop ends every tool call after a fixed 60 s, so waits stop 5 s before that"
            }
            Client::Cursor => {
                "Cursor's CLI/ACP agent ends tool calls after 60 s and shares ~/.cursor/mcp.json with the IDE, so waits stop 5 s before that"
            }
            Client::ClaudeCode => {
                "Claude Code waits long for a tool call, longer still while progress arrives, so most runs finish within one call"
            }
            Client::Vscode => {
                "VS Code has no tool-call timeout, so most runs finish within one call"
            }
        }
    }

    /// The top-level key that holds the servers.
    pub fn container(self) -> &'static str {
        match self {
            Client::Vscode => "servers",
            _ => "mcpServers",
        }
    }

    /// Whether entries name their transport (`"type": "stdio"`).
    pub(super) fn typed(self) -> bool {
        matches!(self, Client::ClaudeCode | Client::Vscode)
    }

    /// What to do once the entry is written.
    pub(super) fn next_step(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => {
                "quit Claude Desktop completely (not just its window) and start it again"
            }
            Client::ClaudeCode => "start a new Claude Code session (/mcp lists the server)",
            Client::Cursor => "restart Cursor (and any running cursor-agent)",
            Client::Vscode => "restart VS Code (or run \"MCP: List Servers\" and start it)",
        }
    }

    /// The client's config file on `os`, from the environment `env` describes.
    pub fn config_path(
        self,
        os: Platform,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<PathBuf, String> {
        let app_dir = |vendor: &[&str]| -> Result<PathBuf, String> {
            let base = match os {
                Platform::Unix => config_home(env)?,
                Platform::MacOs => home(os, env)?.join("Library").join("Application Support"),
                Platform::Windows => absolute_var(env, "APPDATA")?,
            };
            Ok(vendor.iter().fold(base, |path, part| path.join(part)))
        };
        Ok(match self {
            Client::ClaudeDesktop => app_dir(&["Claude"])?.join("claude_desktop_config.json"),
            Client::ClaudeCode => home(os, env)?.join(".claude.json"),
            Client::Cursor => home(os, env)?.join(".cursor").join("mcp.json"),
            Client::Vscode => app_dir(&["Code", "User"])?.join("mcp.json"),
        })
    }
}

fn absolute_var(env: &impl Fn(&str) -> Option<String>, name: &str) -> Result<PathBuf, String> {
    env(name)
        .filter(|v| !v.trim().is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .ok_or_else(|| {
            format!(
                "{name} is not set to an absolute path, so the client's config file cannot be found; set it, or use --print and add the entry yourself"
            )
        })
}

fn home(os: Platform, env: &impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    absolute_var(
        env,
        if os == Platform::Windows {
            "USERPROFILE"
        } else {
            "HOME"
        },
    )
}

/// `$XDG_CONFIG_HOME`, else `~/.config` (a relative value is ignored, as the XDG spec says).
fn config_home(env: &impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    absolute_var(env, "XDG_CONFIG_HOME").or_else(|_| Ok(home(Platform::Unix, env)?.join(".config")))
}
