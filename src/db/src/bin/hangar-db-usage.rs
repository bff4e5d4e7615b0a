//! Where a redb metadata store's bytes go, tree by tree (`script/bench-scale`
//! prints it after its last step): entries, the bytes of their keys and
//! values as stored in leaves, the B-tree's own bytes (branch pages, page
//! headers) and the unused space of its pages, then the file's size and the
//! bytes the disk holds for it. Reads a copy of a stopped node's
//! `metadata_dir/db.redb` or the file itself while the node is stopped
//! (redb opens a file in one process at a time).
//!
//! `hangar-db-usage PATH [OBJECTS]`: with OBJECTS, every figure is also
//! divided by it (bytes per object).

use std::os::unix::fs::MetadataExt;
use std::process::ExitCode;

use redb::{ReadOnlyDatabase, ReadableDatabase, ReadableTableMetadata, TableHandle};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: hangar-db-usage PATH [OBJECTS]");
        return ExitCode::from(2);
    };
    let per: Option<f64> = args.get(1).and_then(|o| o.parse().ok());
    match usage(path, per) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hangar-db-usage: {path}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(path: &str, per: Option<f64>) -> Result<(), Box<dyn std::error::Error>> {
    let db = ReadOnlyDatabase::open(path)?;
    let tx = db.begin_read()?;
    let mut rows = Vec::new();
    for handle in tx.list_tables()? {
        let name = handle.name().to_owned();
        let table = tx.open_untyped_table(handle)?;
        let s = table.stats()?;
        rows.push((
            name,
            table.len()?,
            s.stored_bytes(),
            s.metadata_bytes(),
            s.fragmented_bytes(),
        ));
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.2 + r.3 + r.4));
    let file = std::fs::metadata(path)?;
    let f = |b: u64| match per {
        Some(n) if n > 0.0 => format!("{b} ({:.1})", b as f64 / n),
        _ => b.to_string(),
    };
    println!("| tree | entries | stored bytes | B-tree bytes | unused bytes in its pages |");
    println!("|---|---|---|---|---|");
    let mut total = (0, 0, 0, 0);
    for (name, len, stored, meta, frag) in &rows {
        println!(
            "| {name} | {len} | {} | {} | {} |",
            f(*stored),
            f(*meta),
            f(*frag)
        );
        total = (
            total.0 + len,
            total.1 + stored,
            total.2 + meta,
            total.3 + frag,
        );
    }
    println!(
        "| all trees | {} | {} | {} | {} |",
        total.0,
        f(total.1),
        f(total.2),
        f(total.3)
    );
    println!(
        "\nfile: {} bytes, {} on disk{}",
        file.len(),
        file.blocks() * 512,
        per.map(|n| format!(
            " ({:.1} and {:.1} per object)",
            file.len() as f64 / n,
            (file.blocks() * 512) as f64 / n
        ))
        .unwrap_or_default()
    );
    Ok(())
}
