//! `hangar completions SHELL` and `hangar man`: the shell completion
//! scripts (clap_complete) and the man pages (clap_mangen), generated from
//! the same clap definition the CLI parses with, so they cannot drift from
//! it. Nothing needs building: the installed binary prints them.

use std::io::Write;
use std::path::Path;

use clap_complete::Shell;

use crate::cli::error::{CliError, Exit};

/// The shells `hangar completions` writes a script for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// Prints the completion script of `shell` for `cmd` on stdout.
pub fn completions(mut cmd: clap::Command, shell: CompletionShell) {
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let name = cmd.get_name().to_owned();
    // Into a buffer first: clap_complete panics on a closed pipe.
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    let _ = std::io::stdout().write_all(&out);
}

/// Prints the man page `hangar(1)` (roff) on stdout, or with `dir` writes
/// it and one page per subcommand (`hangar-key(1)`, `hangar-key-create(1)`…)
/// into `dir`.
pub fn man(cmd: clap::Command, dir: Option<&Path>) -> Result<(), CliError> {
    let io =
        |what: String| move |e: std::io::Error| CliError::new(Exit::Failed, format!("{what}: {e}"));
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    match dir {
        None => {
            let mut out = Vec::new();
            render_page(&cmd, &mut out).map_err(io("rendering the man page".into()))?;
            let _ = std::io::stdout().write_all(&out);
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
            write_pages(&cmd, dir)
                .map_err(io(format!("writing the man pages into {}", dir.display())))?;
        }
    }
    Ok(())
}

/// Writes the page of `cmd` and of each of its subcommands, as
/// `<display name>.1`.
fn write_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let mut out = Vec::new();
    render_page(cmd, &mut out)?;
    std::fs::write(dir.join(format!("{name}.1")), out)
}

/// clap_mangen's sections, with the `--help` examples (`after_help`) as an
/// EXAMPLES section set without filling, so each example stays one line.
fn render_page(cmd: &clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(out)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(out)?;
    }
    if let Some(text) = cmd.get_after_help() {
        out.extend_from_slice(examples_section(&text.to_string()).as_bytes());
    }
    if cmd.get_version().is_some() {
        man.render_version_section(out)?;
    }
    Ok(())
}

/// `text` (an `after_help`: `Examples:` and lines) as a roff section in
/// no-fill mode, each line escaped.
fn examples_section(text: &str) -> String {
    let body = text
        .strip_prefix("Examples:")
        .or_else(|| text.strip_prefix("Example:"))
        .unwrap_or(text);
    let body = body.strip_prefix('\n').unwrap_or(body);
    let mut out = String::from(".SH EXAMPLES\n.nf\n");
    for line in body.lines() {
        let line = line.replace('\\', "\\e");
        if line.starts_with('.') || line.starts_with('\'') {
            out.push_str("\\&");
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(".fi\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_are_escaped_and_not_filled() {
        let s = examples_section("Examples:\n  a \\ b\n.dot\n'quote");
        assert_eq!(s, ".SH EXAMPLES\n.nf\n  a \\e b\n\\&.dot\n\\&'quote\n.fi\n");
    }
}
