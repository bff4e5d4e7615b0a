//! Why a CLI command failed, and the exit code that tells a script which
//! kind of failure it was (doc/cli.md, "Exit codes"): the one mapping from
//! the admin operations' errors and the client's to exit codes.

use std::process::ExitCode;

use hangar_api_admin::client::ClientError;
use hangar_api_admin::proto::{AdminError, ErrorCode};
use serde_json::json;

/// The kinds of failure, each with its documented exit code. Clap's own
/// usage errors exit 2 too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The node failed the operation (its log says more), or answered
    /// something the CLI does not understand; `hangar health`: not healthy.
    Failed = 1,
    /// The command line or the config file is wrong, or the node refused
    /// the request as malformed.
    Usage = 2,
    /// The key, bucket, block, worker… named does not exist.
    NotFound = 3,
    /// The request contradicts what exists (a bucket that exists or is
    /// not empty, a scrub already paused, a layout version taken).
    Conflict = 4,
    /// Too few nodes are up for the operation now: retry later.
    Unavailable = 5,
    /// The node could not be reached (socket or `--admin-url`).
    Unreachable = 6,
    /// The admin API refused the token, or is off on that node.
    Refused = 7,
}

impl Exit {
    /// The name `--json` error output gives the kind.
    pub fn name(self) -> &'static str {
        match self {
            Exit::Failed => "Failed",
            Exit::Usage => "Usage",
            Exit::NotFound => "NotFound",
            Exit::Conflict => "Conflict",
            Exit::Unavailable => "Unavailable",
            Exit::Unreachable => "Unreachable",
            Exit::Refused => "Refused",
        }
    }
}

/// A failed command: its kind and a message that says what to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
}

impl CliError {
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        CliError {
            exit,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(Exit::Failed, message)
    }

    /// Prints the error on stderr (one line, or with `--json` a JSON
    /// object) and gives the exit code.
    pub fn report(&self, as_json: bool) -> ExitCode {
        if as_json {
            let v = json!({"error": {
                "kind": self.exit.name(),
                "exit_code": self.exit as u8,
                "message": self.message,
            }});
            eprintln!("{v}");
        } else {
            eprintln!("error: {}", self.message);
        }
        ExitCode::from(self.exit as u8)
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A message from the CLI's own checks of its arguments: a usage error.
impl From<String> for CliError {
    fn from(message: String) -> Self {
        CliError::new(Exit::Usage, message)
    }
}

impl From<&str> for CliError {
    fn from(message: &str) -> Self {
        CliError::new(Exit::Usage, message)
    }
}

impl From<AdminError> for CliError {
    fn from(e: AdminError) -> Self {
        let exit = match e.code {
            ErrorCode::BadRequest => Exit::Usage,
            ErrorCode::NotFound => Exit::NotFound,
            ErrorCode::Conflict => Exit::Conflict,
            ErrorCode::Unavailable => Exit::Unavailable,
            ErrorCode::Internal => Exit::Failed,
        };
        CliError::new(exit, e.message)
    }
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Op(e) => e.into(),
            ClientError::Unreachable(m) => CliError::new(Exit::Unreachable, m),
            ClientError::Refused(m) => CliError::new(Exit::Refused, m),
            ClientError::Protocol(m) => CliError::new(Exit::Failed, m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_own_code() {
        let all = [
            Exit::Failed,
            Exit::Usage,
            Exit::NotFound,
            Exit::Conflict,
            Exit::Unavailable,
            Exit::Unreachable,
            Exit::Refused,
        ];
        let codes: std::collections::BTreeSet<u8> = all.iter().map(|e| *e as u8).collect();
        assert_eq!(codes.len(), all.len());
        assert!(!codes.contains(&0));
        let e: CliError = ClientError::Op(AdminError::not_found("x")).into();
        assert_eq!(e.exit, Exit::NotFound);
        let e: CliError = ClientError::Unreachable("x".into()).into();
        assert_eq!(e.exit, Exit::Unreachable);
        let e: CliError = ClientError::Refused("x".into()).into();
        assert_eq!(e.exit, Exit::Refused);
    }
}
