//! The config file parser (`hangar_util::config::Config::parse`, the
//! Garage-compatible keys and their checks), and what the mesh derives
//! from a parsed config.

#![no_main]

use hangar_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = hangar_util::config::Config::parse(text) {
        let _ = hangar_net::MeshConfig::from_config(&cfg);
    }
});
