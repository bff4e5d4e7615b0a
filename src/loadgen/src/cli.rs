//! The command line: warp's benchmark names and option spellings (`--host`,
//! `--obj.size`, `--autoterm`, `--noclear`, `WARP_ACCESS_KEY`…) with this
//! generator's earlier spellings (`--endpoint`, `--obj-size`, `--no-cleanup`)
//! kept as aliases, and warp's defaults per benchmark.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::LoadgenError;
use crate::mix::Mix;

/// Endpoint used when neither `--endpoint` nor `--host` (`WARP_HOST`) is given:
/// a Hangar node's default S3 port on this machine.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:3900";

const AFTER_HELP: &str = "\
Output: warp's summary (per operation its average and its throughput split into \
1-second segments; for mixed each operation's share and the cluster total). \
--analyze.v adds each operation's request latencies (average, 50/90/99th \
percentile, fastest, slowest) and first errors; --table prints the column table \
with latency percentiles and CPU use instead; --json the full report.

Defaults (as warp): put, get and mixed 10MiB objects, get and mixed 2500 objects; \
delete, list and stat 1KiB objects, delete 25000 and list and stat 10000 objects; \
20 concurrent operations for 5m. The region defaults to `garage`, a Hangar node's \
default `s3_region` (warp's is us-east-1, which Hangar refuses unless configured).

Unlike warp, objects live under a prefix of their own in the bucket, only they are \
deleted afterwards (none with --noclear), and every GET body is checked. Exit \
status 1 if any operation failed.";

#[derive(Debug, Parser)]
#[command(
    name = "hangar-loadgen",
    version,
    about = "Warp-like S3 load generator (AWS Rust SDK)",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// The benchmark to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The benchmarks, named as warp's.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Upload new objects for the whole duration.
    Put(BenchArgs),
    /// Upload --objects objects, then download random ones and check their content.
    Get(BenchArgs),
    /// Upload --objects objects, then run warp's mix: 45% GET, 15% PUT, 30% STAT,
    /// 10% DELETE (see the --*-distrib options).
    Mixed(MixedArgs),
    /// Upload --objects objects, then delete them with DeleteObjects, --batch keys a
    /// request, until all are deleted or the duration is over.
    Delete(DeleteArgs),
    /// Upload --objects objects spread over --concurrent prefixes, then list whole
    /// prefixes (ListObjectsV2, every page) and check that each listing is exact.
    List(BenchArgs),
    /// Upload --objects objects, then read random ones' metadata (HeadObject) and
    /// check their length.
    Stat(BenchArgs),
    /// Upload --objects objects, then run PUTs of new objects and GETs of those with no
    /// retries, reporting per second what was accepted and what refused (`503
    /// SlowDown`; a refused client backs off before its next request as the SDKs'
    /// standard retry strategy would, unless --no-backoff); then read every
    /// acknowledged PUT back. Meant for far more --concurrent clients than the
    /// server can serve.
    Overload(OverloadArgs),
    /// One step of script/bench-scale over objects named by their index
    /// (`scale/<16 hex digits>`): fill, walk or probe (src/scale.rs). Prints
    /// JSON.
    Scale(ScaleArgs),
    /// Print one table, with ratios between runs, from reports written with --json.
    Summary {
        /// JSON report files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// Options every benchmark takes.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// S3 server as host:port, plain http unless --tls (warp's option).
    #[arg(long, env = "WARP_HOST")]
    pub host: Option<String>,
    /// Speak https to --host. This build's client has no TLS, so it is refused.
    #[arg(long, env = "WARP_TLS")]
    pub tls: bool,
    /// S3 endpoint URL (plain http); wins over --host [default: http://127.0.0.1:3900].
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Access key ID.
    #[arg(long, env = "WARP_ACCESS_KEY")]
    pub access_key: String,
    /// Secret access key.
    #[arg(long, env = "WARP_SECRET_KEY", hide_env_values = true)]
    pub secret_key: String,
    /// SigV4 region; must be the server's `s3_region`.
    #[arg(long, env = "WARP_REGION", default_value = "garage")]
    pub region: String,
    /// Bucket to use; created if missing. Only this run's objects are touched.
    #[arg(long, default_value = "warp-benchmark-bucket")]
    pub bucket: String,
    /// Size of each object, e.g. 4KiB, 1MiB (KB, MB… are binary too, as in warp)
    /// [default: 10MiB for put, get, mixed; 1KiB for delete, list, stat].
    #[arg(long = "obj.size", visible_alias = "obj-size", value_parser = parse_size)]
    pub obj_size: Option<u64>,
    /// Operations in flight at once [default: 20].
    #[arg(long)]
    pub concurrent: Option<usize>,
    /// How long to keep starting operations, e.g. 30s, 1m, 1m30s [default: 5m].
    #[arg(long)]
    pub duration: Option<humantime::Duration>,
    /// Objects uploaded before the measured phase [default: get, mixed 2500;
    /// delete 25000; list, stat 10000].
    #[arg(long)]
    pub objects: Option<usize>,
    /// Stop early once throughput is stable (see --autoterm.dur, --autoterm.pct).
    #[arg(long)]
    pub autoterm: bool,
    /// How long throughput must have been stable for --autoterm.
    #[arg(long = "autoterm.dur", default_value = "10s")]
    pub autoterm_dur: humantime::Duration,
    /// How far, in percent, the last 7 of 25 segments of the run may be from the
    /// last one's throughput for --autoterm.
    #[arg(long = "autoterm.pct", default_value_t = 7.5)]
    pub autoterm_pct: f64,
    /// Add request latencies and first errors to the summary.
    #[arg(long = "analyze.v")]
    pub analyze_v: bool,
    /// Print the report as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Print a column table (latency percentiles, CPU use) instead of the summary.
    #[arg(long, conflicts_with = "json")]
    pub table: bool,
    /// Leave the run's objects in the bucket instead of deleting them afterwards.
    #[arg(long = "noclear", visible_alias = "no-cleanup")]
    pub no_cleanup: bool,
    /// Hand PUT bodies to the SDK as streams: it then sends them aws-chunked with an
    /// unsigned payload and the CRC32 in a trailer, instead of signing the payload's
    /// SHA-256 (what it does for bodies in memory).
    #[arg(long)]
    pub streaming: bool,
    /// Send each PUT with `Expect: 100-continue` and its body only after the
    /// server's `100 Continue`, as aws-cli, boto3 and the Java SDK do (a
    /// presigned request over a connection of its own; not with `--streaming`).
    #[arg(long, conflicts_with = "streaming")]
    pub expect_continue: bool,
    /// PID of the server process on this machine, to report its CPU time during the
    /// measured phase (read from /proc).
    #[arg(long)]
    pub server_pid: Option<u32>,
}

/// Options of `mixed`: warp's operation distribution, in relative weights.
#[derive(Debug, Clone, Args)]
pub struct MixedArgs {
    #[command(flatten)]
    pub bench: BenchArgs,
    /// Weight of GET operations.
    #[arg(long = "get-distrib", default_value_t = Mix::WARP.get)]
    pub get: f64,
    /// Weight of STAT operations.
    #[arg(long = "stat-distrib", default_value_t = Mix::WARP.stat)]
    pub stat: f64,
    /// Weight of PUT operations.
    #[arg(long = "put-distrib", default_value_t = Mix::WARP.put)]
    pub put: f64,
    /// Weight of DELETE operations; at most --put-distrib, so objects never run out.
    #[arg(long = "delete-distrib", default_value_t = Mix::WARP.delete)]
    pub delete: f64,
}

/// Options of `delete`.
#[derive(Debug, Clone, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub bench: BenchArgs,
    /// Keys deleted per DeleteObjects request.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
}

/// Options of `overload`.
#[derive(Debug, Clone, Args)]
pub struct OverloadArgs {
    #[command(flatten)]
    pub bench: BenchArgs,
    /// Share of operations that are GETs, in percent (the rest are PUTs).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub get_percent: u8,
    /// A refused client sends its next request at once, instead of backing off
    /// as the AWS SDKs' standard retry strategy does.
    #[arg(long)]
    pub no_backoff: bool,
}

/// Options of `scale`.
#[derive(Debug, Clone, Args)]
pub struct ScaleArgs {
    #[command(flatten)]
    pub bench: BenchArgs,
    /// The step to run.
    #[arg(value_enum)]
    pub step: ScaleStep,
    /// `fill`: the first object's index.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// `fill`: the index after the last object's.
    #[arg(long, default_value_t = 0)]
    pub to: u64,
    /// `probe`: listings and HEADs to time, each.
    #[arg(long, default_value_t = 2000)]
    pub samples: usize,
    /// `delete` keeps, and `walk` and `probe` expect, only the objects whose index is
    /// a multiple of this.
    #[arg(long, default_value_t = 1)]
    pub keep_every: u64,
}

/// The steps of `scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScaleStep {
    /// PUT objects --from..--to.
    Fill,
    /// Delete the objects --from..--to but every --keep-every-th.
    Delete,
    /// List the whole prefix and check it holds exactly objects 0..--objects
    /// (every --keep-every-th).
    Walk,
    /// Time listings from random points and HEADs of random objects.
    Probe,
}

/// A benchmark, for its defaults and its name in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Put,
    Get,
    Mixed,
    Delete,
    List,
    Stat,
    Overload,
}

/// What a benchmark uses for options not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaults {
    pub obj_size: u64,
    pub objects: usize,
    pub concurrent: usize,
    pub duration: Duration,
}

impl Mode {
    /// The benchmark's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Put => "put",
            Mode::Get => "get",
            Mode::Mixed => "mixed",
            Mode::Delete => "delete",
            Mode::List => "list",
            Mode::Stat => "stat",
            Mode::Overload => "overload",
        }
    }

    /// Warp's defaults for its benchmarks; overload keeps its own.
    pub fn defaults(self) -> Defaults {
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * 1024;
        const WARP: Duration = Duration::from_secs(300);
        let (obj_size, objects, concurrent, duration) = match self {
            Mode::Put => (10 * MIB, 0, 20, WARP),
            Mode::Get | Mode::Mixed => (10 * MIB, 2500, 20, WARP),
            Mode::Delete => (KIB, 25_000, 20, WARP),
            Mode::List | Mode::Stat => (KIB, 10_000, 20, WARP),
            Mode::Overload => (MIB, 200, 16, Duration::from_secs(30)),
        };
        Defaults {
            obj_size,
            objects,
            concurrent,
            duration,
        }
    }
}

impl BenchArgs {
    /// The endpoint URL: `--endpoint`, else `http://<--host>`, else
    /// [`DEFAULT_ENDPOINT`].
    pub fn endpoint(&self) -> Result<String, LoadgenError> {
        if let Some(endpoint) = &self.endpoint {
            return Ok(endpoint.clone());
        }
        let Some(host) = &self.host else {
            return Ok(DEFAULT_ENDPOINT.to_owned());
        };
        if self.tls {
            return Err(LoadgenError::InvalidOption {
                option: "tls",
                reason: "this build's S3 client speaks plain http only".into(),
            });
        }
        if host.contains(',') || host.contains("...") {
            return Err(LoadgenError::InvalidOption {
                option: "host",
                reason: format!("one host:port only, not {host:?}"),
            });
        }
        if host.starts_with("http://") || host.starts_with("https://") {
            return Ok(host.clone());
        }
        Ok(format!("http://{host}"))
    }

    /// The options `mode` uses, defaults filled in.
    pub fn resolved(&self, mode: Mode) -> Defaults {
        let d = mode.defaults();
        Defaults {
            obj_size: self.obj_size.unwrap_or(d.obj_size),
            objects: self.objects.unwrap_or(d.objects),
            concurrent: self.concurrent.unwrap_or(d.concurrent),
            duration: self.duration.map_or(d.duration, Into::into),
        }
    }
}

/// A size as warp reads one: a number with an optional unit, every unit binary
/// (`1KB` and `1KiB` are both 1024 bytes).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 4KiB or 1MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    Ok((number * (1u64 << shift) as f64).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Cli {
        Cli::try_parse_from(line.split_whitespace()).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    fn bench(cli: &Cli) -> (&BenchArgs, Mode) {
        match &cli.command {
            Command::Put(a) => (a, Mode::Put),
            Command::Get(a) => (a, Mode::Get),
            Command::Mixed(a) => (&a.bench, Mode::Mixed),
            Command::Delete(a) => (&a.bench, Mode::Delete),
            Command::List(a) => (a, Mode::List),
            Command::Stat(a) => (a, Mode::Stat),
            Command::Overload(a) => (&a.bench, Mode::Overload),
            Command::Scale(_) | Command::Summary { .. } => panic!("not a benchmark"),
        }
    }

    const KEYS: &str = "--access-key AK --secret-key SK";

    #[test]
    fn the_seeds_warp_commands_parse() {
        let mixed = parse(&format!(
            "hangar-loadgen mixed --host=localhost:3991 --objects 500 --obj.size 1MiB {KEYS}"
        ));
        let (args, mode) = bench(&mixed);
        assert_eq!(mode, Mode::Mixed);
        assert_eq!(args.endpoint().unwrap(), "http://localhost:3991");
        let d = args.resolved(mode);
        assert_eq!(d.objects, 500);
        assert_eq!(d.obj_size, 1 << 20);
        assert_eq!(d.concurrent, 20);
        assert_eq!(d.duration, Duration::from_secs(300));
        assert_eq!(args.bucket, "warp-benchmark-bucket");
        assert!(!args.autoterm);
        let Command::Mixed(m) = &mixed.command else {
            unreachable!()
        };
        assert_eq!((m.get, m.stat, m.put, m.delete), (45.0, 30.0, 15.0, 10.0));

        let get = parse(&format!(
            "hangar-loadgen get --host=localhost:3991 --objects 500 --obj.size 1MiB --autoterm {KEYS}"
        ));
        let (args, mode) = bench(&get);
        assert_eq!(mode, Mode::Get);
        assert!(args.autoterm);
        assert_eq!(args.autoterm_pct, 7.5);
        assert_eq!(Duration::from(args.autoterm_dur), Duration::from_secs(10));
        assert_eq!(args.resolved(mode).objects, 500);

        let put = parse(&format!(
            "hangar-loadgen put --host=localhost:3991 --obj.size 1MiB --autoterm {KEYS}"
        ));
        let (args, mode) = bench(&put);
        assert_eq!(mode, Mode::Put);
        assert!(args.autoterm);
        assert_eq!(args.resolved(mode).obj_size, 1 << 20);
    }

    #[test]
    fn warp_options_parse() {
        let cli = parse(&format!(
            "hangar-loadgen delete --host 127.0.0.1:3900 --batch 10 --objects 1000 \
             --concurrent 4 --duration 1m30s --autoterm --autoterm.dur 5s \
             --autoterm.pct 10 --noclear --analyze.v --region us-east-1 --bucket b {KEYS}"
        ));
        let Command::Delete(d) = &cli.command else {
            panic!("{cli:?}")
        };
        assert_eq!(d.batch, 10);
        let r = d.bench.resolved(Mode::Delete);
        assert_eq!((r.objects, r.concurrent, r.obj_size), (1000, 4, 1024));
        assert_eq!(r.duration, Duration::from_secs(90));
        assert_eq!(Duration::from(d.bench.autoterm_dur), Duration::from_secs(5));
        assert_eq!(d.bench.autoterm_pct, 10.0);
        assert!(d.bench.no_cleanup && d.bench.analyze_v);
        assert_eq!(
            (d.bench.region.as_str(), d.bench.bucket.as_str()),
            ("us-east-1", "b")
        );
        for (line, mode, size, objects) in [
            ("list", Mode::List, 1024, 10_000),
            ("stat", Mode::Stat, 1024, 10_000),
            ("put", Mode::Put, 10 << 20, 0),
            ("get", Mode::Get, 10 << 20, 2500),
        ] {
            let cli = parse(&format!("hangar-loadgen {line} {KEYS}"));
            let (args, m) = bench(&cli);
            assert_eq!(m, mode);
            let r = args.resolved(m);
            assert_eq!((r.obj_size, r.objects), (size, objects), "{line}");
            assert_eq!(args.endpoint().unwrap(), DEFAULT_ENDPOINT);
        }
        let cli = parse(&format!(
            "hangar-loadgen mixed --get-distrib 1 --stat-distrib 2 --put-distrib 3 \
             --delete-distrib 0 {KEYS}"
        ));
        let Command::Mixed(m) = &cli.command else {
            panic!()
        };
        assert_eq!((m.get, m.stat, m.put, m.delete), (1.0, 2.0, 3.0, 0.0));
    }

    /// The invocations of `script/` and the end-to-end test still parse, with
    /// the meanings they had.
    #[test]
    fn earlier_spellings_still_parse() {
        let cli = parse(&format!(
            "hangar-loadgen get --obj-size 1MiB --concurrent 16 --objects 64 \
             --endpoint http://127.0.0.1:3900 {KEYS} --region garage --bucket bench \
             --duration 10s --server-pid 42 --json"
        ));
        let (args, mode) = bench(&cli);
        assert_eq!(args.endpoint().unwrap(), "http://127.0.0.1:3900");
        let r = args.resolved(mode);
        assert_eq!((r.obj_size, r.concurrent, r.objects), (1 << 20, 16, 64));
        assert_eq!(r.duration, Duration::from_secs(10));
        assert_eq!(args.server_pid, Some(42));
        assert!(args.json);
        let cli = parse(&format!(
            "hangar-loadgen put --obj-size 1KiB --concurrent 32 --duration 10s \
             --endpoint http://127.0.0.1:1 {KEYS} --region garage --bucket bench \
             --no-cleanup --json --streaming"
        ));
        let (args, _) = bench(&cli);
        assert!(args.no_cleanup && args.streaming);
        let cli = parse(&format!(
            "hangar-loadgen overload --endpoint http://127.0.0.1:1 {KEYS} --bucket b \
             --obj-size 1MiB --concurrent 500 --duration 60s --objects 64 --json \
             --no-backoff --expect-continue"
        ));
        let Command::Overload(o) = &cli.command else {
            panic!()
        };
        assert!(o.no_backoff && o.bench.expect_continue);
        assert_eq!(o.get_percent, 50);
        assert_eq!(o.bench.resolved(Mode::Overload).concurrent, 500);
        // Overload keeps its own defaults.
        let cli = parse(&format!("hangar-loadgen overload {KEYS}"));
        let (args, mode) = bench(&cli);
        let r = args.resolved(mode);
        assert_eq!((r.obj_size, r.objects, r.concurrent), (1 << 20, 200, 16));
        assert!(matches!(
            parse("hangar-loadgen summary a.json b.json").command,
            Command::Summary { ref files } if files.len() == 2
        ));
    }

    #[test]
    fn host_and_endpoint() {
        let cli = parse(&format!(
            "hangar-loadgen put --host h:1 --endpoint http://e:2 {KEYS}"
        ));
        assert_eq!(bench(&cli).0.endpoint().unwrap(), "http://e:2");
        for bad in ["--host a:1,b:2", "--host h{1...4}:9000", "--host h:1 --tls"] {
            let cli = parse(&format!("hangar-loadgen put {bad} {KEYS}"));
            assert!(bench(&cli).0.endpoint().is_err(), "{bad}");
        }
        let both = format!("hangar-loadgen put --json --table {KEYS}");
        assert!(Cli::try_parse_from(both.split_whitespace()).is_err());
    }

    #[test]
    fn sizes_are_binary_as_in_warp() {
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1MB"), Ok(1 << 20));
        assert_eq!(parse_size("10mb"), Ok(10 << 20));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1KB"), Ok(1024));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("100B"), Ok(100));
        assert!(parse_size("1XB").is_err());
        assert!(parse_size("MiB").is_err());
    }
}
