//! Building policies from configuration: a [`PolicySpec`] is the serde form used in
//! scenario files, and `name:key=value,…` is its command-line form.

use crate::affinity::{Affinity, AffinityConfig};
use crate::cachefair::{CacheFair, CacheFairConfig};
use crate::casc::{Casc, CascConfig};
use crate::clustering::{ClusteringConfig, ThreadClustering};
use crate::demo::{Demo, DemoConfig};
use crate::migrate::{Migrate, MigrateConfig};
use crate::process_llc::{ProcessLlc, ProcessLlcConfig};
use crate::timeslice::{Timeslice, TimesliceConfig};
use cachesched_core::Policy;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The registry: one row per policy, `Variant(Config) = "name" => Type`, each with its
/// documentation. The row makes the policy's [`PolicySpec`] variant (serialized as
/// `{ name = "name", ... }`), its entry in [`POLICY_NAMES`], the range check of its
/// configuration (`Config::validate`) and its construction (`Type::new(config)`).
macro_rules! registry {
    ($($(#[doc = $doc:expr])* $variant:ident($config:ty) = $name:literal => $policy:ty;)*) => {
        /// Names accepted by [`PolicySpec::parse`].
        pub const POLICY_NAMES: &[&str] = &[$($name),*];

        /// A policy and its configuration, e.g. `{ name = "demo", slice_ms = 10 }`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "name")]
        pub enum PolicySpec {
            $($(#[doc = $doc])* #[serde(rename = $name)] $variant($config),)*
        }

        impl PolicySpec {
            /// The policy's name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(PolicySpec::$variant(_) => $name,)*
                }
            }

            /// Checks the parameters' ranges (scenario files are checked when loaded).
            pub fn validate(&self) -> Result<(), PolicyError> {
                let r = match self {
                    $(PolicySpec::$variant(c) => c.validate(),)*
                };
                r.map_err(|reason| PolicyError::BadParameters {
                    name: self.name().into(),
                    reason,
                })
            }
        }

        /// Builds the policy described by `spec`.
        pub fn build_policy(spec: &PolicySpec) -> Box<dyn Policy> {
            match spec {
                $(PolicySpec::$variant(c) => Box::new(<$policy>::new(c.clone())),)*
            }
        }
    };
}

registry! {
    /// Cache affinity: home LLC domains or cores ([`Affinity`]).
    Affinity(AffinityConfig) = "affinity" => Affinity;
    /// The cache-fair scheduler: CPU time compensating unequal cache sharing
    /// ([`CacheFair`]).
    Cachefair(CacheFairConfig) = "cachefair" => CacheFair;
    /// CASC co-scheduling by partial-cache miss rates ([`Casc`]).
    Casc(CascConfig) = "casc" => Casc;
    /// Sharing-aware thread clustering: threads sharing data placed on one chip
    /// ([`ThreadClustering`]).
    Clustering(ClusteringConfig) = "clustering" => ThreadClustering;
    /// The demonstration policy ([`Demo`]).
    Demo(DemoConfig) = "demo" => Demo;
    /// Forced migration between cores or LLC domains, the affinity paper's low
    /// affinity ([`Migrate`]).
    Migrate(MigrateConfig) = "migrate" => Migrate;
    /// Process-to-LLC aggregation, after Linux's cache-aware scheduling series
    /// ([`ProcessLlc`]): all threads of a process on one LLC, no sharing detection.
    ProcessLlc(ProcessLlcConfig) = "process-llc" => ProcessLlc;
    /// Timeslice aggregation ([`Timeslice`]).
    Timeslice(TimesliceConfig) = "timeslice" => Timeslice;
}

/// Errors in a policy specification.
#[derive(Debug, Error)]
pub enum PolicyError {
    /// The name is not a known policy.
    #[error("unknown policy '{name}'; known policies: {}", POLICY_NAMES.join(", "))]
    UnknownPolicy {
        /// The name given.
        name: String,
    },
    /// A parameter is malformed or unknown.
    #[error("bad parameters for policy '{name}': {reason}")]
    BadParameters {
        /// The policy.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

impl PolicySpec {
    /// Whether the policy treats threads by their class (cache-fair, best-effort).
    pub fn uses_classes(&self) -> bool {
        match self {
            PolicySpec::Cachefair(_) => true,
            PolicySpec::Demo(d) => d.cache_fair_nice.is_some() || d.best_effort_nice.is_some(),
            _ => false,
        }
    }

    /// Parses the command-line form `name` or `name:key=value,key=value` (values in
    /// TOML syntax, e.g. `demo:slice_ms=10,pin=false`; a bare word such as
    /// `mode=dynamic` is taken as a string).
    pub fn parse(s: &str) -> Result<PolicySpec, PolicyError> {
        let (name, params) = s.split_once(':').unwrap_or((s, ""));
        let name = name.trim();
        if !POLICY_NAMES.contains(&name) {
            return Err(PolicyError::UnknownPolicy { name: name.into() });
        }
        let head = format!("name = \"{name}\"\n");
        let mut doc = head.clone();
        let mut lines = Vec::new();
        for kv in params.split(',').filter(|p| !p.trim().is_empty()) {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(PolicyError::BadParameters {
                    name: name.into(),
                    reason: format!("'{kv}' is not of the form key=value"),
                });
            };
            let v = v.trim();
            // a bare word that is not a TOML value (`mode=dynamic`) is a string
            let v = if toml::from_str::<toml::Table>(&format!("v = {v}")).is_ok() {
                v.to_string()
            } else {
                format!("{v:?}")
            };
            lines.push((k.trim().to_string(), format!("{} = {v}\n", k.trim())));
            doc += &lines.last().expect("pushed").1;
        }
        let spec: PolicySpec = toml::from_str(&doc).map_err(|e| {
            // the key at fault, found by reading each alone (a tagged enum's errors
            // carry no position)
            let key = lines.iter().find_map(|(k, line)| {
                toml::from_str::<PolicySpec>(&format!("{head}{line}"))
                    .err()
                    .map(|_| k.clone())
            });
            PolicyError::BadParameters {
                name: name.into(),
                reason: match key {
                    Some(k) => format!("{k}: {}", e.message()),
                    None => e.message().to_string(),
                },
            }
        })?;
        spec.validate()?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every policy's typed statistics name it as the registry does and are what it
    /// reports: its `stat_fields` are its struct's, each field is described, and every
    /// key its record holds belongs to a field. Fails if a struct names another policy,
    /// a policy reports an undeclared key, or a field has no description.
    #[test]
    fn every_policy_reports_its_typed_statistics() {
        use cachesched_core::policy_stats::{field_of, PolicyStats, StatField};
        let typed: [(&[&str], &[StatField]); 8] = [
            (crate::AffinityStats::POLICIES, crate::AffinityStats::FIELDS),
            (
                crate::CacheFairStats::POLICIES,
                crate::CacheFairStats::FIELDS,
            ),
            (crate::CascStats::POLICIES, crate::CascStats::FIELDS),
            (
                crate::ClusteringStats::POLICIES,
                crate::ClusteringStats::FIELDS,
            ),
            (crate::DemoStats::POLICIES, crate::DemoStats::FIELDS),
            (crate::MigrateStats::POLICIES, crate::MigrateStats::FIELDS),
            (
                crate::ProcessLlcStats::POLICIES,
                crate::ProcessLlcStats::FIELDS,
            ),
            (
                crate::TimesliceStats::POLICIES,
                crate::TimesliceStats::FIELDS,
            ),
        ];
        assert_eq!(typed.len(), POLICY_NAMES.len());
        // every policy, and each mode that names itself apart
        let specs = POLICY_NAMES
            .iter()
            .copied()
            .chain(["timeslice:mode=dynamic"]);
        for spec in specs {
            let spec = PolicySpec::parse(spec).unwrap();
            let p = build_policy(&spec);
            let name = p.name();
            let (names, fields) = typed
                .iter()
                .find(|(n, _)| n[0] == spec.name())
                .unwrap_or_else(|| panic!("no typed statistics name {}", spec.name()));
            assert!(names.contains(&name), "{name} not in {names:?}");
            assert_eq!(p.stat_fields(), *fields, "{name}");
            for f in *fields {
                assert!(
                    f.about.trim().len() > 10,
                    "{name}.{} is undescribed",
                    f.name
                );
            }
            for (k, _) in p.stats() {
                assert!(
                    field_of(fields, &k).is_some(),
                    "{name} reports undeclared {k}"
                );
            }
        }
    }

    #[test]
    fn parses_cli_form_and_rejects_unknowns() {
        let s = PolicySpec::parse("demo:slice_ms=10,pin=false").unwrap();
        assert_eq!(
            s,
            PolicySpec::Demo(DemoConfig {
                pin: false,
                slice_ms: Some(10.0),
                tick_ms: 10.0,
                nice: None,
                cache_fair_nice: None,
                best_effort_nice: None,
            })
        );
        assert!(matches!(
            PolicySpec::parse("nosuch"),
            Err(PolicyError::UnknownPolicy { .. })
        ));
        let e = PolicySpec::parse("demo:bogus=1").unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
        assert!(PolicySpec::parse("demo:slice_ms").is_err());
        // out of range (issue 77, item 7): a negative slice, a nice value beyond -20–19
        for bad in ["demo:slice_ms=-1", "demo:nice=40", "demo:tick_ms=0"] {
            let e = PolicySpec::parse(bad).unwrap_err().to_string();
            assert!(e.contains("must be between"), "{bad}: {e}");
        }
        let t = PolicySpec::parse("timeslice:mode=dynamic,slice_ms=30").unwrap();
        assert!(
            matches!(t, PolicySpec::Timeslice(c) if c.mode == crate::timeslice::Mode::Dynamic && c.slice_ms == 30.0)
        );
        assert!(PolicySpec::parse("timeslice:mode=sideways").is_err());
        // a value of the wrong type names its key, wherever it stands (a tagged enum's
        // errors carry no position of their own)
        let e = PolicySpec::parse("casc:secondary=\"calibrated\",threshold=abc")
            .unwrap_err()
            .to_string();
        assert!(e.contains("threshold: invalid type"), "{e}");
        assert_eq!(build_policy(&s).name(), "demo");
    }
}
