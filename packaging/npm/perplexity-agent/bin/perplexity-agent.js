#!/usr/bin/env node
// `npx perplexity-agent`: run the native binary from the @perplexity-agent/<os>-<cpu>
// package that npm installed as an optional dependency (npm picks the one whose os/cpu
// fields match; no postinstall, nothing downloaded here).
//
// The child shares this process's stdin/stdout/stderr, so an MCP client's JSON-RPC goes
// straight to the binary; Node never reads or buffers it. Signals are passed on and the
// child's exit code (or its signal) becomes ours, so a client sees what the binary did.
"use strict";

const { spawn } = require("child_process");
const os = require("os");
const path = require("path");

const PLATFORMS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"];
const target = `${process.platform}-${process.arch}`;
const exe = process.platform === "win32" ? "perplexity-agent.exe" : "perplexity-agent";

function binaryPath() {
  // A development override, the same variable the llm plugin honours.
  if (process.env.PERPLEXITY_AGENT_BIN) return process.env.PERPLEXITY_AGENT_BIN;
  const pkg = `@perplexity-agent/${target}`;
  try {
    return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), "bin", exe);
  } catch (_) {
    const why = PLATFORMS.includes(target)
      ? `its package ${pkg} is not installed (was it skipped with --no-optional / --omit=optional?). Reinstall without that flag.`
      : `there is no prebuilt binary for ${target} (prebuilt: ${PLATFORMS.join(", ")}).`;
    process.stderr.write(
      `perplexity-agent: cannot run on this machine: ${why}\n` +
        "Other ways to install: `uvx perplexity-agent`, or `cargo install perplexity-agent`.\n"
    );
    process.exit(1);
  }
}

const child = spawn(binaryPath(), process.argv.slice(2), { stdio: "inherit", windowsHide: true });

const forwarded = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];
for (const sig of forwarded) {
  try {
    process.on(sig, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    });
  } catch (_) {
    // Not every signal exists on every platform (Windows).
  }
}

child.on("error", (err) => {
  process.stderr.write(`perplexity-agent: cannot start ${child.spawnfile}: ${err.message}\n`);
  process.exit(1);
});

child.on("exit", (code, signal) => {
  if (signal) {
    // End the same way the binary did, so our parent sees the signal, not a code.
    for (const sig of forwarded) process.removeAllListeners(sig);
    process.kill(process.pid, signal);
    // A signal Node ignores (SIGPIPE) does not end us: exit as a shell reports it.
    setTimeout(() => process.exit(128 + (os.constants.signals[signal] || 0)), 100);
    return;
  }
  process.exit(code === null ? 1 : code);
});
