//! The end-of-run report: a readable table, or one JSON object with
//! `--json`. Every workload fills a [`Report`] the same way.

use serde_json::{json, Map, Value};

use crate::stats::LatencySummary;

/// The session a workload ran on, as negotiated.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub address: String,
    pub share: String,
    pub dialect: &'static str,
    pub signing: bool,
    pub encryption: bool,
}

pub struct Report {
    workload: &'static str,
    session: SessionInfo,
    params: Vec<(&'static str, Value)>,
    results: Vec<(&'static str, Value, &'static str)>,
    latencies: Vec<(String, LatencySummary)>,
}

impl Report {
    pub fn new(workload: &'static str, session: SessionInfo) -> Report {
        Report {
            workload,
            session,
            params: Vec::new(),
            results: Vec::new(),
            latencies: Vec::new(),
        }
    }

    pub fn param(&mut self, name: &'static str, value: impl Into<Value>) -> &mut Self {
        self.params.push((name, value.into()));
        self
    }

    /// A figure, with its unit for the table.
    pub fn result(
        &mut self,
        name: &'static str,
        value: impl Into<Value>,
        unit: &'static str,
    ) -> &mut Self {
        self.results.push((name, value.into(), unit));
        self
    }

    pub fn latency(&mut self, name: impl Into<String>, summary: LatencySummary) -> &mut Self {
        self.latencies.push((name.into(), summary));
        self
    }

    pub fn to_json(&self) -> Value {
        let mut params = Map::new();
        for (k, v) in &self.params {
            params.insert((*k).to_string(), v.clone());
        }
        let mut out = Map::new();
        out.insert("workload".into(), json!(self.workload));
        out.insert("address".into(), json!(self.session.address));
        out.insert("share".into(), json!(self.session.share));
        out.insert("dialect".into(), json!(self.session.dialect));
        out.insert("signing".into(), json!(self.session.signing));
        out.insert("encryption".into(), json!(self.session.encryption));
        out.insert("params".into(), Value::Object(params));
        for (k, v, _) in &self.results {
            out.insert((*k).to_string(), v.clone());
        }
        let mut lat = Map::new();
        for (name, s) in &self.latencies {
            lat.insert(name.clone(), serde_json::to_value(s).unwrap_or(Value::Null));
        }
        out.insert("latency_us".into(), Value::Object(lat));
        Value::Object(out)
    }

    pub fn to_table(&self) -> String {
        let s = &self.session;
        let mut out = format!(
            "copyless bench {} against //{}/{} (SMB {}, signing {}, encryption {})\n",
            self.workload,
            s.address,
            s.share,
            s.dialect,
            if s.signing { "on" } else { "off" },
            if s.encryption { "on" } else { "off" },
        );
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={}", plain(v)))
            .collect();
        out.push_str(&format!("  {}\n\n", params.join(" ")));
        let width = self.results.iter().map(|r| r.0.len()).max().unwrap_or(0);
        for (k, v, unit) in &self.results {
            out.push_str(&format!("  {k:<width$}  {:>14} {unit}\n", number(v)));
        }
        if !self.latencies.is_empty() {
            out.push_str(&format!(
                "\n  {:<10} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
                "latency", "count", "avg µs", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
            ));
            for (name, l) in &self.latencies {
                out.push_str(&format!(
                    "  {name:<10} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}\n",
                    l.count, l.avg_us, l.p50_us, l.p99_us, l.p999_us, l.max_us
                ));
            }
        }
        out
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn number(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.abs() >= 100.0 {
                format!("{f:.0}")
            } else {
                format!("{f:.3}")
            }
        }
        other => plain(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_table_carry_the_same_figures() {
        let mut r = Report::new(
            "io",
            SessionInfo {
                address: "127.0.0.1:445".into(),
                share: "share".into(),
                dialect: "3.1.1",
                signing: true,
                encryption: false,
            },
        );
        r.param("size", 4096).param("pattern", "random");
        r.result("iops", 1234.5, "IO/s").result("ios", 100u64, "");
        r.latency(
            "all",
            LatencySummary {
                count: 100,
                avg_us: 10.0,
                p50_us: 9.0,
                p99_us: 20.0,
                p999_us: 30.0,
                max_us: 31.0,
            },
        );
        let j = r.to_json();
        assert_eq!(j["workload"], "io");
        assert_eq!(j["signing"], true);
        assert_eq!(j["params"]["size"], 4096);
        assert_eq!(j["iops"], 1234.5);
        assert_eq!(j["ios"], 100);
        assert_eq!(j["latency_us"]["all"]["p99_us"], 20.0);
        let t = r.to_table();
        assert!(t.contains("signing on"), "{t}");
        assert!(t.contains("size=4096 pattern=random"), "{t}");
        assert!(t.contains("1234 IO/s") || t.contains("1235 IO/s"), "{t}");
        assert!(t.contains("20.0"), "{t}");
    }
}
