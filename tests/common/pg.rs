//! PostgreSQL for tests: `TEST_DATABASE_URL` if set, otherwise one throwaway cluster per test
//! process (started on first use, stopped at exit). Every test gets its own database, cloned
//! from a template that is migrated once.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use sagents::clock::SystemClock;
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::store::Store;
use sqlx::{Connection, Executor, PgConnection};

/// Where Debian and Ubuntu put each installed major version's server binaries.
const VERSIONED_BINDIRS: &str = "/usr/lib/postgresql";

struct Cluster {
    root: PathBuf,
    data: PathBuf,
}

/// The server's maintenance URL (database `postgres` or the one in `TEST_DATABASE_URL`).
static SERVER: OnceLock<Result<String, String>> = OnceLock::new();
static BINDIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static TEMPLATE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
/// `CREATE DATABASE … TEMPLATE` refuses to run while another clone of it is in progress.
static CREATE_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn external_url() -> Option<String> {
    std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

fn server_url() -> String {
    let url = SERVER.get_or_init(|| match external_url() {
        Some(url) => Ok(url),
        None => start_cluster(),
    });
    match url {
        Ok(url) => url.clone(),
        Err(e) => panic!("cannot start the test PostgreSQL cluster: {e}"),
    }
}

fn with_database(server: &str, name: &str) -> String {
    let mut url = url::Url::parse(server).expect("a valid PostgreSQL URL");
    url.set_path(&format!("/{name}"));
    url.to_string()
}

fn postgres_ids() -> (u32, u32) {
    // SAFETY: getpwnam is given a NUL-terminated name and its result is read at once.
    unsafe {
        let pw = libc::getpwnam(c"postgres".as_ptr());
        assert!(!pw.is_null(), "the `postgres` user does not exist");
        ((*pw).pw_uid, (*pw).pw_gid)
    }
}

fn has_initdb(dir: &Path) -> bool {
    std::fs::metadata(dir.join("initdb"))
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The major version a `<VERSIONED_BINDIRS>/<version>/bin` folder is for, as numbers.
fn version_of(bindir: &Path) -> Option<Vec<u32>> {
    let version = bindir.parent()?.file_name()?.to_str()?;
    version.split('.').map(|part| part.parse().ok()).collect()
}

/// The folder of the highest version among `bindirs`, compared as numbers (9.6 < 15 < 16).
fn newest(bindirs: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    bindirs
        .into_iter()
        .filter_map(|dir| Some((version_of(&dir)?, dir)))
        .max()
        .map(|(_, dir)| dir)
}

fn initdb_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let dir = std::env::split_paths(&path).find(|dir| has_initdb(dir))?;
    // A linked `initdb` (as in /usr/local/bin) may stand alone; `pg_ctl` sits by its target.
    let initdb = std::fs::canonicalize(dir.join("initdb")).ok()?;
    initdb.parent().map(Path::to_path_buf)
}

fn pg_config_bindir() -> Option<PathBuf> {
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && has_initdb(&dir)).then_some(dir)
}

fn versioned_bindir() -> Option<PathBuf> {
    let versions = std::fs::read_dir(VERSIONED_BINDIRS).ok()?;
    newest(
        versions
            .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
            .filter(|dir| has_initdb(dir)),
    )
}

/// The folder with PostgreSQL's server binaries: `PG_BINDIR`, else `initdb` on `PATH`, else
/// `pg_config --bindir`, else the newest `/usr/lib/postgresql/<version>/bin`.
pub fn pg_bindir() -> Result<&'static Path, String> {
    let found = BINDIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("PG_BINDIR").filter(|d| !d.is_empty()) {
            let dir = PathBuf::from(dir);
            return if has_initdb(&dir) {
                Ok(dir)
            } else {
                Err(format!("PG_BINDIR={} has no initdb", dir.display()))
            };
        }
        initdb_on_path()
            .or_else(pg_config_bindir)
            .or_else(versioned_bindir)
            .ok_or_else(|| {
                format!(
                    "no PostgreSQL server binaries (initdb, pg_ctl) found: looked at $PG_BINDIR, \
                     initdb on $PATH, `pg_config --bindir` and {VERSIONED_BINDIRS}/*/bin. \
                     Install them (`apt-get install postgresql`), point PG_BINDIR at their \
                     folder, or set TEST_DATABASE_URL to use a running server"
                )
            })
    });
    found.as_deref().map_err(Clone::clone)
}

fn run_as_postgres(root: &PathBuf, program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(pg_bindir()?.join(program))
        .args(args)
        .current_dir(root)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// A new folder owned by the `postgres` user, kept until removed.
pub fn cluster_root() -> Result<PathBuf, String> {
    let root = tempfile::Builder::new()
        .prefix("sagents-pg-")
        .tempdir()
        .map_err(|e| e.to_string())?
        .keep();
    let (uid, gid) = postgres_ids();
    std::os::unix::fs::chown(&root, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
    Ok(root)
}

/// Initialises a cluster in `data` (inside `root`).
pub fn init_cluster(root: &PathBuf, data: &std::path::Path) -> Result<(), String> {
    let data_arg = data.to_string_lossy().into_owned();
    run_as_postgres(
        root,
        "initdb",
        &[
            "-D",
            &data_arg,
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        ],
    )
}

/// Starts the cluster in `data` on `port` and waits until it accepts connections. Fast and
/// not crash-safe unless `durable`: a commit is then on disk (in the kernel's cache, which
/// outlives the server's processes) before it returns.
pub fn start_server(
    root: &PathBuf,
    data: &std::path::Path,
    port: u16,
    durable: bool,
) -> Result<(), String> {
    let commit = if durable { "on" } else { "off" };
    let options = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
         -c synchronous_commit={commit} -c full_page_writes=off -c max_connections=300",
        root.display()
    );
    let data_arg = data.to_string_lossy().into_owned();
    let log = root.join("postgres.log").to_string_lossy().into_owned();
    run_as_postgres(
        root,
        "pg_ctl",
        &[
            "-D", &data_arg, "-l", &log, "-w", "-t", "60", "-o", &options, "start",
        ],
    )
}

/// Stops the cluster in `data` (`mode`: `fast` or `immediate`) and waits until it is down.
pub fn stop_server(root: &PathBuf, data: &std::path::Path, mode: &str) -> Result<(), String> {
    let data_arg = data.to_string_lossy().into_owned();
    run_as_postgres(root, "pg_ctl", &["-D", &data_arg, "-m", mode, "-w", "stop"])
}

/// A free port, then the server started on it (retried: another process may take the port).
pub fn start_on_free_port(
    root: &PathBuf,
    data: &std::path::Path,
    durable: bool,
) -> Result<u16, String> {
    let mut last_error = String::new();
    for _ in 0..5 {
        let port = free_port()?;
        match start_server(root, data, port, durable) {
            Ok(()) => return Ok(port),
            Err(e) => last_error = e,
        }
    }
    Err(last_error)
}

fn start_cluster() -> Result<String, String> {
    let root = cluster_root()?;
    let data = root.join("data");
    let cluster = CLUSTER.get_or_init(|| Cluster {
        root: root.clone(),
        data: data.clone(),
    });
    // SAFETY: registers a plain `extern "C" fn` once; it only reads the cluster static.
    unsafe {
        libc::atexit(stop_cluster);
    }
    init_cluster(&root, &cluster.data)?;
    let port = start_on_free_port(&root, &cluster.data, false)?;
    Ok(format!("postgres://postgres@127.0.0.1:{port}/postgres"))
}

extern "C" fn stop_cluster() {
    if let Some(cluster) = CLUSTER.get() {
        let _ = stop_server(&cluster.root, &cluster.data, "immediate");
        let _ = std::fs::remove_dir_all(&cluster.root);
    }
}

async fn admin_connection() -> PgConnection {
    PgConnection::connect(&server_url())
        .await
        .expect("connect to the test PostgreSQL server")
}

fn unique_name(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

async fn template() -> &'static str {
    TEMPLATE
        .get_or_init(|| async {
            let name = unique_name("sagents_template");
            let mut admin = admin_connection().await;
            admin
                .execute(format!("CREATE DATABASE \"{name}\"").as_str())
                .await
                .expect("create the template database");
            let store = Store::connect(
                &with_database(&server_url(), &name),
                Arc::new(SystemClock),
                ChangeHub::new(),
                Arc::new(Metrics::default()),
            )
            .await
            .expect("connect to the template database");
            store
                .migrate()
                .await
                .expect("migrate the template database");
            store.close().await;
            if external_url().is_some() {
                // SAFETY: registers a plain `extern "C" fn` once; it only reads a static.
                unsafe {
                    libc::atexit(drop_external_template);
                }
            }
            name
        })
        .await
}

/// A database that is dropped again when this guard goes, on an external server only (a
/// throwaway cluster disappears as a whole at exit; on an external server the template is
/// dropped at exit too).
pub struct PgDatabase {
    name: String,
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        if external_url().is_some() {
            drop_database(self.name.clone());
        }
    }
}

extern "C" fn drop_external_template() {
    if let Some(name) = TEMPLATE.get() {
        drop_database(name.clone());
    }
}

/// Drops a database from outside any runtime (a guard's drop, or process exit).
fn drop_database(name: String) {
    let dropped = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        rt.block_on(async {
            let mut admin = PgConnection::connect(&server_url()).await.ok()?;
            admin
                .execute(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)").as_str())
                .await
                .ok()
        })
    });
    let _ = dropped.join();
}

async fn create_database(template: &str) -> (String, PgDatabase) {
    let name = unique_name("test");
    let mut admin = admin_connection().await;
    {
        let _serial = CREATE_LOCK.lock().await;
        admin
            .execute(format!("CREATE DATABASE \"{name}\" TEMPLATE \"{template}\"").as_str())
            .await
            .expect("create a test database");
    }
    let _ = admin.close().await;
    (with_database(&server_url(), &name), PgDatabase { name })
}

/// A fresh, migrated database.
pub async fn fresh_postgres_database() -> (String, PgDatabase) {
    let template = template().await;
    create_database(template).await
}

/// A fresh, migrated database (its URL only; it lives until the process exits).
pub async fn fresh_postgres_url() -> String {
    let (url, db) = fresh_postgres_database().await;
    std::mem::forget(db);
    url
}

/// A fresh database with no tables at all.
pub async fn blank_postgres_database() -> (String, PgDatabase) {
    create_database("template0").await
}

#[test]
fn the_newest_bindir_is_picked_by_number_not_by_text() {
    let dir = |version: &str| PathBuf::from(format!("{VERSIONED_BINDIRS}/{version}/bin"));
    let newest_of = |versions: &[&str]| newest(versions.iter().map(|v| dir(v)));
    assert_eq!(newest_of(&["15", "9.6", "16", "10"]), Some(dir("16")));
    assert_eq!(newest_of(&["9.6", "15"]), Some(dir("15")));
    assert_eq!(newest_of(&["9.6", "9.10"]), Some(dir("9.10")));
    assert_eq!(
        newest_of(&["16", "latest"]),
        Some(dir("16")),
        "a folder that is not a version is passed over"
    );
    assert_eq!(newest_of(&[]), None);
}
