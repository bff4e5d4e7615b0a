//! Meshes in one process for the model's tests: started on 127.0.0.1 with
//! short ping settings, and connected to each other.

use std::path::Path;
use std::time::{Duration, Instant};

use hangar_net::{Mesh, MeshConfig};

/// A mesh on 127.0.0.1 keeping its state in `dir`, with the cluster secret
/// `secret`.
pub async fn start_mesh(dir: &Path, secret: [u8; 32]) -> Mesh {
    let mut cfg = MeshConfig::new(secret, "127.0.0.1:0".parse().unwrap(), dir.to_path_buf());
    cfg.rpc_timeout = Duration::from_secs(10);
    cfg.ping_interval = Duration::from_millis(200);
    cfg.ping_timeout = Duration::from_secs(1);
    cfg.peer_exchange_interval = Duration::from_millis(500);
    Mesh::start(cfg).await.unwrap()
}

/// Connects every mesh to every other and waits until each sees all up.
pub async fn connect_all(meshes: &[&Mesh]) {
    for (a, m) in meshes.iter().enumerate() {
        for o in &meshes[a + 1..] {
            m.connect(&o.peer_addr()).await.unwrap();
        }
    }
    let start = Instant::now();
    while !meshes
        .iter()
        .all(|m| meshes.iter().all(|o| m.is_up(o.id())))
    {
        assert!(start.elapsed() < Duration::from_secs(5), "meshes not up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
