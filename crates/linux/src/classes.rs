//! Thread classes on Linux: which managed threads are cache-fair or best-effort (paper
//! 2's classes), assigned by rules like a priority.
//!
//! A rule is `CLASS=MATCH` with `CLASS` `cache-fair` or `best-effort` and `MATCH` one of
//! - `pid:N` — every thread of process N;
//! - `comm:GLOB` — threads whose own command name or whose process's matches `GLOB`
//!   (`*` any run of characters, `?` one character; the kernel keeps 15 characters of a
//!   name, so a pattern needing more than that could never match and is refused);
//! - `cgroup:DIR` — threads listed in that cgroup (`cgroup.threads` in v2, `tasks` in
//!   v1), read again at every scan.
//!
//! The first rule that matches gives the class; a thread that matches none has no
//! class (the policy leaves it to the kernel's default treatment). A class is decided
//! when the daemon takes a thread over and kept for its life, like the rest of
//! [`cachesched_core::ThreadInfo`].

use crate::procfs::{self, Pid};
use cachesched_core::ThreadClass;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::str::FromStr;
use thiserror::Error;

/// The longest command name the kernel keeps (`TASK_COMM_LEN` − 1).
pub const COMM_LEN: usize = 15;

/// Why a class rule is not usable.
#[derive(Debug, Error, PartialEq)]
pub enum ClassError {
    /// The text is not `CLASS=MATCH`.
    #[error("class rule '{0}': expected CLASS=MATCH with CLASS cache-fair or best-effort and MATCH pid:N, comm:GLOB or cgroup:DIR (e.g. cache-fair=comm:mcf*)")]
    Syntax(String),
    /// A command-name pattern that can never match.
    #[error("class rule '{rule}': command names are at most {COMM_LEN} characters, so '{pattern}' can never match; use its first {COMM_LEN} characters or end it with *")]
    CommTooLong {
        /// The rule.
        rule: String,
        /// The pattern.
        pattern: String,
    },
    /// The process does not exist.
    #[error("class rule '{rule}': process {pid} does not exist")]
    NoSuchProcess {
        /// The rule.
        rule: String,
        /// The process.
        pid: Pid,
    },
    /// The cgroup's thread list cannot be read.
    #[error("class rule '{rule}': cannot read the threads of cgroup {path}: {reason} (give the cgroup's directory, e.g. /sys/fs/cgroup/cpu/mygroup)")]
    Cgroup {
        /// The rule.
        rule: String,
        /// The directory.
        path: String,
        /// What failed.
        reason: String,
    },
}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// Every thread of this process.
    Pid(Pid),
    /// Threads whose command name, or whose process's, matches this glob.
    Comm(String),
    /// Threads of this cgroup.
    Cgroup(PathBuf),
}

/// One rule: threads that `matcher` matches are of `class`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassRule {
    /// The class given.
    pub class: ThreadClass,
    /// The threads it is given to.
    pub matcher: Matcher,
    /// The rule as written.
    pub text: String,
}

impl FromStr for ClassRule {
    type Err = ClassError;

    fn from_str(s: &str) -> Result<ClassRule, ClassError> {
        let syntax = || ClassError::Syntax(s.to_string());
        let (class, m) = s.split_once('=').ok_or_else(syntax)?;
        let class = ThreadClass::parse(class.trim()).ok_or_else(syntax)?;
        let (kind, arg) = m.split_once(':').ok_or_else(syntax)?;
        if arg.is_empty() {
            return Err(syntax());
        }
        let matcher = match kind {
            "pid" => Matcher::Pid(
                arg.parse()
                    .ok()
                    .filter(|&p: &Pid| p > 0)
                    .ok_or_else(syntax)?,
            ),
            "comm" => {
                // every character but * consumes one of the name's
                if arg.chars().filter(|&c| c != '*').count() > COMM_LEN {
                    return Err(ClassError::CommTooLong {
                        rule: s.to_string(),
                        pattern: arg.to_string(),
                    });
                }
                Matcher::Comm(arg.to_string())
            }
            "cgroup" => Matcher::Cgroup(PathBuf::from(arg)),
            _ => return Err(syntax()),
        };
        Ok(ClassRule {
            class,
            matcher,
            text: s.to_string(),
        })
    }
}

impl serde::Serialize for ClassRule {
    /// As written.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl ClassRule {
    /// Whether what the rule names exists now: the process, the cgroup's thread list.
    pub fn check(&self) -> Result<(), ClassError> {
        match &self.matcher {
            Matcher::Pid(pid) => {
                procfs::process_stat(*pid)
                    .map(|_| ())
                    .map_err(|_| ClassError::NoSuchProcess {
                        rule: self.text.clone(),
                        pid: *pid,
                    })
            }
            Matcher::Cgroup(dir) => {
                procfs::cgroup_threads(dir)
                    .map(|_| ())
                    .map_err(|e| ClassError::Cgroup {
                        rule: self.text.clone(),
                        path: dir.display().to_string(),
                        reason: e.to_string(),
                    })
            }
            Matcher::Comm(_) => Ok(()),
        }
    }
}

/// Whether `name` matches `glob` (`*`: any run of characters, `?`: one character).
pub fn glob_match(glob: &str, name: &str) -> bool {
    let (g, n): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    // iterative matching with backtracking to the last star
    let (mut gi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == n[ni]) {
            gi += 1;
            ni += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some((gi, ni));
            gi += 1;
        } else if let Some((sg, sn)) = star {
            gi = sg + 1;
            ni = sn + 1;
            star = Some((sg, sn + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&c| c == '*')
}

/// The rules, with the cgroups' thread lists as last read.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    rules: Vec<ClassRule>,
    /// Per rule, the threads of its cgroup (empty for other rules).
    members: Vec<BTreeSet<i32>>,
}

impl Classifier {
    /// A classifier applying `rules` in order.
    pub fn new(rules: Vec<ClassRule>) -> Classifier {
        let members = vec![BTreeSet::new(); rules.len()];
        Classifier { rules, members }
    }

    /// Whether there are rules at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Re-reads the thread lists of the rules' cgroups (a cgroup that vanished matches
    /// nothing from then on).
    pub fn refresh(&mut self) {
        for (r, m) in self.rules.iter().zip(&mut self.members) {
            if let Matcher::Cgroup(dir) = &r.matcher {
                *m = procfs::cgroup_threads(dir)
                    .map(|v| v.into_iter().collect())
                    .unwrap_or_default();
            }
        }
    }

    /// The class of thread `tid` of process `pid`, whose command name is `comm` and
    /// whose process's is `process_comm`.
    pub fn class_of(
        &self,
        tid: i32,
        pid: Pid,
        comm: &str,
        process_comm: &str,
    ) -> Option<ThreadClass> {
        self.rules
            .iter()
            .zip(&self.members)
            .find(|(r, members)| match &r.matcher {
                Matcher::Pid(p) => *p == pid,
                Matcher::Comm(g) => glob_match(g, comm) || glob_match(g, process_comm),
                Matcher::Cgroup(_) => members.contains(&tid),
            })
            .map(|(r, _)| r.class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell() {
        for (g, n, want) in [
            ("mcf*", "mcf_base.amd64", true),
            ("mcf*", "gcc", false),
            ("*db*", "postgresdb", true),
            ("g?c", "gcc", true),
            ("g?c", "gcca", false),
            ("*", "", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
            ("exact", "exact", true),
        ] {
            assert_eq!(glob_match(g, n), want, "{g} on {n}");
        }
    }

    #[test]
    fn rules_parse_and_bad_ones_are_named() {
        let r: ClassRule = "cache-fair=comm:mcf*".parse().unwrap();
        assert_eq!(
            (r.class, r.matcher),
            (ThreadClass::CacheFair, Matcher::Comm("mcf*".into()))
        );
        let r: ClassRule = "best-effort=pid:42".parse().unwrap();
        assert_eq!(r.matcher, Matcher::Pid(42));
        for bad in [
            "cache-fair",
            "fair=pid:1",
            "cache-fair=pid:x",
            "cache-fair=pid:0",
            "cache-fair=name:x",
            "cache-fair=comm:",
        ] {
            let e = bad.parse::<ClassRule>().unwrap_err();
            assert!(e.to_string().contains("CLASS=MATCH"), "{bad}: {e}");
        }
        let e = "cache-fair=comm:a_very_long_program_name"
            .parse::<ClassRule>()
            .unwrap_err();
        assert!(e.to_string().contains("can never match"), "{e}");
        assert!("cache-fair=comm:a_very_long_prog*"
            .parse::<ClassRule>()
            .is_err());
        assert!("cache-fair=comm:a_very_long_*".parse::<ClassRule>().is_ok());
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let c = Classifier::new(vec![
            "best-effort=pid:7".parse().unwrap(),
            "cache-fair=comm:mcf*".parse().unwrap(),
        ]);
        assert_eq!(
            c.class_of(8, 7, "mcf", "mcf"),
            Some(ThreadClass::BestEffort)
        );
        assert_eq!(
            c.class_of(9, 9, "worker", "mcf"),
            Some(ThreadClass::CacheFair)
        );
        assert_eq!(c.class_of(9, 9, "worker", "gcc"), None);
    }
}
