//! What the bench measures, its knobs, and the markdown table it prints.

use std::time::Duration;

use sagents::store::Backend;

use crate::claims::ClaimRates;
use crate::db;
use crate::drive::{pool_shape, Groups};
use crate::floor;
use crate::stats::{list, median, rate, Latency};

pub struct Knobs {
    pub backends: Vec<Backend>,
    pub n: usize,
    pub reps: usize,
    pub rate: f64,
    pub seconds: f64,
    pub local_n: usize,
    pub local_latency: usize,
    pub local_rate: f64,
    pub resume_n: usize,
    pub m: usize,
    pub lifecycle_m: usize,
    pub bulk: usize,
    pub leased: usize,
    pub floor_seconds: u64,
    pub sqlite_floor_seconds: u64,
    pub phases: Vec<String>,
}

pub fn knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a valid value")),
        Err(_) => default,
    }
}

pub const PHASES: [&str; 5] = ["floor", "noop", "local", "resume", "claims"];

impl Knobs {
    pub fn from_env() -> Self {
        let backends = knob("LBENCH_BACKENDS", "sqlite,postgres".to_string())
            .split(',')
            .map(|b| match b.trim() {
                "sqlite" => Backend::Sqlite,
                "postgres" => Backend::Postgres,
                other => panic!("LBENCH_BACKENDS: unknown backend `{other}`"),
            })
            .collect();
        let k = Knobs {
            backends,
            n: knob("LBENCH_N", 2000),
            reps: knob("LBENCH_REPS", 3),
            rate: knob("LBENCH_RATE", 200.0),
            seconds: knob("LBENCH_SECONDS", 5.0),
            local_n: knob("LBENCH_LOCAL_N", 200),
            local_latency: knob("LBENCH_LOCAL_LATENCY", 60),
            local_rate: knob("LBENCH_LOCAL_RATE", 20.0),
            resume_n: knob("LBENCH_RESUME_N", 40),
            m: knob("LBENCH_M", 2000),
            lifecycle_m: knob("LBENCH_LIFECYCLE_M", 1000),
            bulk: knob("LBENCH_BULK", 100_000),
            leased: knob("LBENCH_LEASED", 5000),
            floor_seconds: knob("LBENCH_FLOOR_SECONDS", 10),
            sqlite_floor_seconds: knob("LBENCH_SQLITE_FLOOR_SECONDS", 3),
            phases: knob("LBENCH_PHASES", PHASES.join(","))
                .split(',')
                .map(|p| p.trim().to_string())
                .collect(),
        };
        for p in &k.phases {
            assert!(
                PHASES.contains(&p.as_str()),
                "LBENCH_PHASES: unknown phase `{p}`"
            );
        }
        assert!(
            k.n > 0
                && k.reps > 0
                && k.local_n > 0
                && k.resume_n > 0
                && k.m > 0
                && k.lifecycle_m > 0,
            "counts and rates must be positive"
        );
        assert!(k.rate > 0.0 && k.local_rate > 0.0, "rates must be positive");
        assert!(k.local_latency > 0 && k.latency_runs() > 0);
        k
    }

    pub fn runs(&self, phase: &str) -> bool {
        self.phases.iter().any(|p| p == phase)
    }

    pub fn latency_runs(&self) -> usize {
        (self.rate * self.seconds).round() as usize
    }

    /// pgbench runs once, for long; the SQLite loop is repeated, for short.
    pub fn floor_runs(&self, backend: Backend) -> (usize, u64) {
        match backend {
            Backend::Sqlite => (self.reps, self.sqlite_floor_seconds),
            Backend::Postgres => (1, self.floor_seconds),
        }
    }
}

#[derive(Debug)]
pub struct Figures {
    pub backend: Backend,
    pub floor: Vec<f64>,
    pub provision_rate: f64,
    pub noop: Vec<f64>,
    pub noop_latency: Latency,
    pub noop_release_calls: usize,
    pub noop_expected_calls: usize,
    pub noop_retries: i64,
    pub noop_groups: Vec<Groups>,
    pub local: Vec<f64>,
    pub local_latency: Latency,
    pub local_retries: i64,
    pub resume_latency: Latency,
    pub claims: ClaimRates,
}

impl Figures {
    pub fn new(backend: Backend) -> Self {
        Figures {
            backend,
            floor: Vec::new(),
            provision_rate: 0.0,
            noop: Vec::new(),
            noop_latency: Latency::default(),
            noop_release_calls: 0,
            noop_expected_calls: 0,
            noop_retries: 0,
            noop_groups: Vec::new(),
            local: Vec::new(),
            local_latency: Latency::default(),
            local_retries: 0,
            resume_latency: Latency::default(),
            claims: ClaimRates::default(),
        }
    }
}

fn ratio(a: &[f64], b: &[f64]) -> String {
    let r = median(a) / median(b);
    if r.is_nan() {
        "–".into()
    } else {
        format!("{r:.2}")
    }
}

fn row(out: &mut String, label: &str, cells: Vec<String>, target: &str) {
    out.push_str(&format!("| {label} | {} | {target} |\n", cells.join(" | ")));
}

/// The log filter in effect: `RUST_LOG`, else the service's default.
fn log_filter() -> String {
    match std::env::var("RUST_LOG") {
        Ok(f) if !f.trim().is_empty() => format!("`{f}` (RUST_LOG)"),
        _ => "the service's default (`info`)".into(),
    }
}

/// Group commits and writes per release, and the mean group size, of each repetition.
fn groups_cell(groups: &[Groups], n: usize) -> String {
    groups
        .iter()
        .map(|g| {
            format!(
                "{:.2} group commits and {:.2} claimed runs per release, {:.1} runs per claim, \
                 {:.1} writes per group, \
                 {:.0} µs CPU and {:.1} context switches per release",
                g.commits as f64 / n as f64,
                g.claimed as f64 / n as f64,
                g.claimed as f64 / g.claims.max(1) as f64,
                g.writes as f64 / g.commits.max(1) as f64,
                g.cpu_us as f64 / n as f64,
                g.switches as f64 / n as f64
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn print(k: &Knobs, figures: &[Figures], took: Duration, dropped_log_lines: u64) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let (workers, batch) = pool_shape();
    let cells = |f: &dyn Fn(&Figures) -> String| figures.iter().map(f).collect::<Vec<_>>();
    let mut out = String::new();
    out.push_str(&format!(
        "## Lifecycle bench: suspend → released ({cores} cores, {workers} workers × {batch} runs, \
         median of {} repetitions unless noted, {:.0} s in all)\n\n",
        k.reps,
        took.as_secs_f64()
    ));
    out.push_str(&format!(
        "Logs: the service's subscriber, JSON lines on stderr through its non-blocking writer, \
         filter {}; {dropped_log_lines} lines dropped by a full queue.\n\n",
        log_filter()
    ));
    let names: Vec<&str> = figures.iter().map(|f| db::name(f.backend)).collect();
    out.push_str(&format!("| measure | {} | target |\n", names.join(" | ")));
    out.push_str(&format!("|---|{}---|\n", "---|".repeat(figures.len())));
    row(
        &mut out,
        &format!("floor: single-row UPDATE tx/s ({} rows)", floor::ROWS),
        cells(&|f| {
            let how = match f.backend {
                Backend::Sqlite => {
                    format!("1 connection, {} × {} s", k.reps, k.sqlite_floor_seconds)
                }
                Backend::Postgres => format!("pgbench -c 8 -j 2 -T {}, 1 run", k.floor_seconds),
            };
            format!("{} ({how})", rate(median(&f.floor)))
        }),
        "",
    );
    row(
        &mut out,
        &format!("no-op provider: releases/s (N = {})", k.n),
        cells(&|f| rate(median(&f.noop))),
        "≥ 3000 SQLite, ≥ 2000 PostgreSQL",
    );
    row(
        &mut out,
        "no-op releases/s ÷ floor tx/s",
        cells(&|f| ratio(&f.noop, &f.floor)),
        "",
    );
    row(
        &mut out,
        "no-op: process CPU µs / context switches per release",
        cells(&|f| {
            let per = |v: fn(&Groups) -> u64| {
                let each: Vec<f64> = f
                    .noop_groups
                    .iter()
                    .map(|g| v(g) as f64 / k.n as f64)
                    .collect();
                median(&each)
            };
            format!("{:.0} / {:.1}", per(|g| g.cpu_us), per(|g| g.switches))
        }),
        "",
    );
    row(
        &mut out,
        &format!(
            "no-op: suspend commit → release received, ms p50 / p95 / p99 ({} runs at {:.0}/s)",
            k.latency_runs(),
            k.rate
        ),
        cells(&|f| f.noop_latency.cell()),
        "p50 ≤ 10",
    );
    row(
        &mut out,
        &format!("local provider: releases/s (N = {})", k.local_n),
        cells(&|f| rate(median(&f.local))),
        "",
    );
    row(
        &mut out,
        &format!(
            "local provider: suspend commit → record released, ms p50 / p95 / p99 ({} runs, one at a time)",
            k.local_latency
        ),
        cells(&|f| f.local_latency.cell()),
        "",
    );
    row(
        &mut out,
        &format!(
            "local provider, every snapshot failing recoverably: reply → resume claim offered, ms p50 / p95 / p99 ({} runs, one at a time)",
            k.resume_n
        ),
        cells(&|f| f.resume_latency.cell()),
        "p99 ≤ 2000",
    );
    for (kind, m) in [("runtime", k.m), ("lifecycle", k.lifecycle_m)] {
        let empty = |c: &ClaimRates| c.series(kind == "runtime").0.to_vec();
        let loaded = |c: &ClaimRates| c.series(kind == "runtime").1.to_vec();
        row(
            &mut out,
            &format!("{kind} claims/s, 1 per call over M = {m} due runs: empty database"),
            cells(&|f| rate(median(&empty(&f.claims)))),
            "",
        );
        row(
            &mut out,
            &format!(
                "{kind} claims/s: the same with {} suspended runs (released records)",
                k.bulk
            ),
            cells(&|f| rate(median(&loaded(&f.claims)))),
            "",
        );
        row(
            &mut out,
            &format!("{kind} claims: loaded ÷ empty"),
            cells(&|f| ratio(&loaded(&f.claims), &empty(&f.claims))),
            "≥ 0.80",
        );
    }
    let idle = |c: &ClaimRates, leased: bool| {
        if leased {
            c.idle_leased.clone()
        } else {
            c.idle_empty.clone()
        }
    };
    row(
        &mut out,
        "idle runtime claims/s (nothing due): no run leased",
        cells(&|f| rate(median(&idle(&f.claims, false)))),
        "",
    );
    row(
        &mut out,
        &format!(
            "idle runtime claims/s: {} runs holding live leases",
            k.leased
        ),
        cells(&|f| rate(median(&idle(&f.claims, true)))),
        "",
    );
    row(
        &mut out,
        "idle runtime claims: leased ÷ none",
        cells(&|f| ratio(&idle(&f.claims, true), &idle(&f.claims, false))),
        "",
    );
    out.push_str("\nEvery repetition:\n\n");
    for f in figures {
        let c = &f.claims;
        out.push_str(&format!(
            "- {}: floor [{}] tx/s; provisioning {} runs/s (no-op); no-op releases [{}]/s \
             ({}), {} release calls for {} runs, {} retries; no-op latency over {} runs, max {:.1} ms, \
             at {:.0} suspends/s; local releases [{}]/s, {} retries, latency over {} runs, max \
             {:.1} ms, mean {:.2} ms, at {:.1} suspends/s; reply → resume over {} runs, max {:.1} ms; runtime claims empty [{}] loaded [{}]; lifecycle claims empty [{}] \
             loaded [{}]; idle claims none leased [{}] leased [{}]\n",
            db::name(f.backend),
            list(&f.floor),
            rate(f.provision_rate),
            list(&f.noop),
            groups_cell(&f.noop_groups, k.n),
            f.noop_release_calls,
            f.noop_expected_calls,
            f.noop_retries,
            f.noop_latency.n,
            f.noop_latency.max,
            f.noop_latency.rate,
            list(&f.local),
            f.local_retries,
            f.local_latency.n,
            f.local_latency.max,
            f.local_latency.mean,
            f.local_latency.rate,
            f.resume_latency.n,
            f.resume_latency.max,
            list(&c.runtime_empty),
            list(&c.runtime_loaded),
            list(&c.lifecycle_empty),
            list(&c.lifecycle_loaded),
            list(&c.idle_empty),
            list(&c.idle_leased),
        ));
    }
    print!("{out}");
}
