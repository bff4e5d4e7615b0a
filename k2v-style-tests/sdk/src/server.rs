//! One real `hangar server` process per test, with its own config, directories and
//! loopback ports, stopped and wiped when the [`TestServer`] is dropped.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use serde::Deserialize;
use tempfile::TempDir;

/// Region the test servers are configured with.
pub const REGION: &str = "garage";

/// How long a server may take to open its S3 port.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Attempts at starting a server, each on fresh ports (another process may grab a port
/// between our probe and the server's bind).
const START_ATTEMPTS: usize = 3;

/// An access key as `hangar key create --json` reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct AccessKey {
    /// `GK` + 24 hex digits.
    pub access_key_id: String,
    /// 64 hex digits.
    pub secret_access_key: String,
    /// The canonical user id S3 shows as the owner of the key's buckets.
    pub canonical_id: String,
}

/// A running single-node `hangar server` and the key the tests use on it.
pub struct TestServer {
    child: Child,
    /// Holds the config, metadata, data and log; removed on drop.
    dir: TempDir,
    config: PathBuf,
    /// `http://127.0.0.1:<port>` of the S3 API.
    pub endpoint: String,
    /// A key with the create-bucket right.
    pub key: AccessKey,
}

/// The `hangar` binary of the same build profile as this test, or a clear panic.
fn hangar_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("HANGAR_BIN") {
        return PathBuf::from(path);
    }
    // Test executables live in target/<profile>/deps/; the binary in target/<profile>/.
    let beside_tests = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("hangar")));
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../..")
                    .join(dir)
            }
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let candidates: Vec<PathBuf> = beside_tests
        .into_iter()
        .chain([target_dir.join("debug/hangar")])
        .collect();
    candidates
        .iter()
        .find(|path| path.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "the hangar binary is not built (looked at {candidates:?}); \
                 run `cargo build -p hangar` first, or set HANGAR_BIN"
            )
        })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("binding an ephemeral loopback port")
        .port()
}

fn rpc_secret() -> String {
    let bytes = crate::random_bytes(32, u64::from(std::process::id()) ^ free_port() as u64);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn log_tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        let _ = file.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

impl TestServer {
    /// Starts a fresh server and creates a key allowed to create buckets.
    pub fn start() -> TestServer {
        Self::start_with("")
    }

    /// Like [`TestServer::start`], with `s3_api_lines` (TOML) appended to the
    /// `[s3_api]` section of the config, e.g. `root_domain = ".s3.localhost"`.
    pub fn start_with(s3_api_lines: &str) -> TestServer {
        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(s3_api_lines) {
                Ok(server) => return server,
                Err(failure) => last_failure = failure,
            }
        }
        panic!("hangar server did not start: {last_failure}");
    }

    fn try_start(s3_api_lines: &str) -> Result<TestServer, String> {
        let dir = tempfile::Builder::new()
            .prefix("hangar-sdk-test-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let s3_port = free_port();
        let rpc_port = free_port();
        let config = dir.path().join("hangar.toml");
        let root = dir.path().display();
        std::fs::write(
            &config,
            format!(
                "metadata_dir = \"{root}/meta\"\n\
                 data_dir = \"{root}/data\"\n\
                 db_engine = \"redb\"\n\
                 replication_factor = 1\n\
                 rpc_secret = \"{}\"\n\
                 rpc_bind_addr = \"127.0.0.1:{rpc_port}\"\n\
                 metadata_fsync = false\n\
                 [s3_api]\n\
                 api_bind_addr = \"127.0.0.1:{s3_port}\"\n\
                 s3_region = \"{REGION}\"\n\
                 {s3_api_lines}\n",
                rpc_secret()
            ),
        )
        .map_err(|e| format!("writing config: {e}"))?;
        let log_path = dir.path().join("server.log");
        let log = std::fs::File::create(&log_path).map_err(|e| format!("log file: {e}"))?;
        let mut child = Command::new(hangar_bin())
            .arg("-c")
            .arg(&config)
            .arg("server")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| format!("log file: {e}"))?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawning hangar: {e}"))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], s3_port));
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "hangar server exited with {status}; log:\n{}",
                    log_tail(&log_path)
                ));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            if started.elapsed() > START_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "S3 port {s3_port} not open after {START_TIMEOUT:?}; log:\n{}",
                    log_tail(&log_path)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut server = TestServer {
            child,
            dir,
            config,
            endpoint: format!("http://{addr}"),
            key: AccessKey {
                access_key_id: String::new(),
                secret_access_key: String::new(),
                canonical_id: String::new(),
            },
        };
        server.key = server.create_key("sdk-tests", true);
        Ok(server)
    }

    /// Runs `hangar -c <config> <args>` against this server; panics, with the command's
    /// output, unless it succeeds. Returns stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new(hangar_bin())
            .arg("-c")
            .arg(&self.config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running hangar {args:?}: {e}"));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "hangar {args:?} failed with {}\nstdout: {stdout}\nstderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    /// Creates a key named `name` through the CLI, with the create-bucket right if asked.
    pub fn create_key(&self, name: &str, create_bucket: bool) -> AccessKey {
        let stdout = self.cli(&["key", "create", name, "--json"]);
        let key: AccessKey = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("key create --json printed {stdout:?}: {e}"));
        if create_bucket {
            self.cli(&["key", "allow", &key.access_key_id, "--create-bucket"]);
        }
        key
    }

    /// An SDK client using the test key.
    pub fn client(&self) -> aws_sdk_s3::Client {
        self.client_for(&self.key)
    }

    /// An SDK client using `key`: path-style, region [`REGION`], SDK defaults for
    /// checksums, no retries (a test must see the first answer), bounded timeouts.
    pub fn client_for(&self, key: &AccessKey) -> aws_sdk_s3::Client {
        let config = self
            .config_builder(&key.access_key_id, &key.secret_access_key)
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }

    /// The client configuration, for tests that change one setting (wrong secret, …).
    pub fn config_builder(
        &self,
        access_key: &str,
        secret_key: &str,
    ) -> aws_sdk_s3::config::Builder {
        aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(&self.endpoint)
            .force_path_style(true)
            .credentials_provider(Credentials::new(access_key, secret_key, None, None, "test"))
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .retry_config(RetryConfig::standard().with_max_attempts(1))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_timeout(Duration::from_secs(120))
                    .build(),
            )
    }

    /// The S3 port.
    pub fn port(&self) -> u16 {
        self.endpoint
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("endpoint ends with a port")
    }

    /// The server's log so far (last lines), for failure messages.
    pub fn log(&self) -> String {
        log_tail(&self.dir.path().join("server.log"))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // kill -9 is survivable by contract, and the directory is deleted anyway.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- hangar server log (last lines) ---\n{}", self.log());
        }
    }
}
