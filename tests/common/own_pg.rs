//! A PostgreSQL cluster of one test's own, which the test may stop and start again on the
//! same port (a database outage). Commits survive its crash. Removed when dropped.

use std::path::PathBuf;

use sqlx::{Connection, Executor, PgConnection};

use super::pg;

pub struct OwnCluster {
    root: PathBuf,
    data: PathBuf,
    port: u16,
}

impl OwnCluster {
    pub fn start() -> OwnCluster {
        let root = pg::cluster_root().expect("a folder for the cluster");
        let data = root.join("data");
        pg::init_cluster(&root, &data).expect("initdb");
        let port = pg::start_on_free_port(&root, &data, true).expect("start the cluster");
        OwnCluster { root, data, port }
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// A new, empty database on this cluster; its URL.
    pub async fn database(&self, name: &str) -> String {
        let mut admin = PgConnection::connect(&self.url("postgres"))
            .await
            .expect("connect to the own cluster");
        admin
            .execute(format!("CREATE DATABASE \"{name}\"").as_str())
            .await
            .expect("create a database");
        let _ = admin.close().await;
        self.url(name)
    }

    /// Shuts the server down at once, as a crash or a failover would.
    pub fn stop(&self) {
        pg::stop_server(&self.root, &self.data, "immediate").expect("stop the cluster");
    }

    /// Starts the server again on the same port.
    pub fn restart(&self) {
        pg::start_server(&self.root, &self.data, self.port, true).expect("restart the cluster");
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = pg::stop_server(&self.root, &self.data, "immediate");
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
