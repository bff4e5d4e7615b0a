//! `hangar completions SHELL` and `hangar man`: the shell completion
//! scripts (clap_complete) and the man pages (clap_mangen), generated from
//! the same clap definition the CLI parses with, so they cannot drift from
//! it. Nothing needs building: the installed binary prints them.

use std::io::Write;
use std::path::Path;

use clap_complete::Shell;

use crate::cli_error::{CliError, Exit};

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
    match dir {
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .map_err(io("rendering the man page".into()))?;
            let _ = std::io::stdout().write_all(&out);
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
            clap_mangen::generate_to(cmd, dir)
                .map_err(io(format!("writing the man pages into {}", dir.display())))?;
        }
    }
    Ok(())
}
