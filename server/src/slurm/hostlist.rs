//! Slurm hostlist expressions: `gpu[001-064,070],dgx-[1-4]`, `rack[1-2]-n[01-02]`.
//!
//! Pure. Read as Slurm's `hostlist.c` reads them: names separated by commas or blanks
//! (outside brackets), zero padding from the range's first bound (`[001-064]` gives
//! `gpu001`), `[5-]` as `[5]`, and refused: a reversed range, a negative or empty bound,
//! an empty entry in brackets. Expansion is bounded, so a hostile expression cannot
//! exhaust memory.

/// Why an expression was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    #[error("unbalanced brackets in {0:?}")]
    Brackets(String),
    #[error("invalid range {0:?}")]
    Range(String),
    #[error("expression expands to more than {0} names")]
    TooMany(usize),
}

/// The most names one expression may expand to.
pub const MAX_HOSTS: usize = 100_000;

/// Expands a hostlist expression into names, in order, keeping duplicates out.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let mut out: Vec<String> = Vec::new();
    for item in split_top_level(expr)? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        for name in expand_one(item)? {
            if !out.contains(&name) {
                if out.len() >= MAX_HOSTS {
                    return Err(HostlistError::TooMany(MAX_HOSTS));
                }
                out.push(name);
            }
        }
    }
    Ok(out)
}

/// Splits at commas outside brackets.
fn split_top_level(expr: &str) -> Result<Vec<&str>, HostlistError> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in expr.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(HostlistError::Brackets(expr.chars().take(80).collect()));
                }
            }
            // hostlist.c separates hosts by commas and by blanks and newlines.
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                parts.push(&expr[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::Brackets(expr.chars().take(80).collect()));
    }
    parts.push(&expr[start..]);
    Ok(parts)
}

/// Expands one item that may hold several bracket groups (`a[1-2]b[3-4]`).
fn expand_one(item: &str) -> Result<Vec<String>, HostlistError> {
    let Some(open) = item.find('[') else {
        return Ok(vec![item.to_string()]);
    };
    let close = open
        + item[open..]
            .find(']')
            .ok_or_else(|| HostlistError::Brackets(item.into()))?;
    let prefix = &item[..open];
    let rest = expand_one(&item[close + 1..])?;
    let mut out = Vec::new();
    for part in item[open + 1..close].split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            // `5-` is `5`, as hostlist.c reads a range with no upper bound.
            Some((a, "")) => (a, a),
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let bad = || HostlistError::Range(part.chars().take(40).collect());
        if lo.is_empty()
            || !lo.bytes().all(|b| b.is_ascii_digit())
            || !hi.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(bad());
        }
        let (a, b): (u64, u64) = (
            lo.parse().map_err(|_| bad())?,
            hi.parse().map_err(|_| bad())?,
        );
        if a > b {
            return Err(bad());
        }
        if (b - a) as usize >= MAX_HOSTS
            || out.len() + ((b - a + 1) as usize) * rest.len() > MAX_HOSTS
        {
            return Err(HostlistError::TooMany(MAX_HOSTS));
        }
        let width = if lo.len() > 1 && lo.starts_with('0') {
            lo.len()
        } else {
            0
        };
        for n in a..=b {
            for r in &rest {
                out.push(format!("{prefix}{n:0width$}{r}"));
            }
        }
    }
    Ok(out)
}

/// Compresses names into a hostlist expression (`gpu[001-003,007]`), grouping names that
/// differ only in a trailing number of the same width.
pub fn compress(names: &[String]) -> String {
    let mut groups: Vec<(String, usize, Vec<u64>)> = Vec::new();
    let mut plain: Vec<String> = Vec::new();
    for n in names {
        let digits = n.bytes().rev().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 18 {
            plain.push(n.clone());
            continue;
        }
        let (prefix, num) = n.split_at(n.len() - digits);
        let Ok(v) = num.parse::<u64>() else {
            plain.push(n.clone());
            continue;
        };
        let width = if digits > 1 && num.starts_with('0') {
            digits
        } else {
            0
        };
        match groups
            .iter_mut()
            .find(|(p, w, _)| p == prefix && *w == width)
        {
            Some(g) => g.2.push(v),
            None => groups.push((prefix.to_string(), width, vec![v])),
        }
    }
    let mut parts = Vec::new();
    for (prefix, width, mut nums) in groups {
        nums.sort_unstable();
        nums.dedup();
        if nums.len() == 1 {
            parts.push(format!("{prefix}{:0width$}", nums[0]));
            continue;
        }
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < nums.len() {
            let mut j = i;
            while j + 1 < nums.len() && nums[j + 1] == nums[j] + 1 {
                j += 1;
            }
            ranges.push(if i == j {
                format!("{:0width$}", nums[i])
            } else {
                format!("{:0width$}-{:0width$}", nums[i], nums[j])
            });
            i = j + 1;
        }
        parts.push(format!("{prefix}[{}]", ranges.join(",")));
    }
    parts.extend(plain);
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(s: &str) -> Vec<String> {
        expand(s).unwrap_or_else(|err| panic!("{s}: {err}"))
    }

    #[test]
    fn ranges_lists_padding_and_plain_names() {
        assert_eq!(
            e("gpu[001-003,070]"),
            vec!["gpu001", "gpu002", "gpu003", "gpu070"]
        );
        assert_eq!(e("dgx-[1-3]"), vec!["dgx-1", "dgx-2", "dgx-3"]);
        assert_eq!(
            e("gpu[001-002],dgx-[1-2],login1"),
            vec!["gpu001", "gpu002", "dgx-1", "dgx-2", "login1"]
        );
        assert_eq!(e("n[8-11]"), vec!["n8", "n9", "n10", "n11"]);
        assert_eq!(e("n[09-11]"), vec!["n09", "n10", "n11"]);
        assert_eq!(e(""), Vec::<String>::new());
        assert_eq!(e("a,a,b"), vec!["a", "b"]);
    }

    /// Cases as Slurm's `src/common/hostlist.c` reads them (`hostlist_create`,
    /// `_parse_single_range`).
    #[test]
    fn as_slurm_s_hostlist_c_reads_them() {
        // Blanks and newlines separate hosts as commas do; empty entries are skipped.
        assert_eq!(e("a1 a2\ta3\na4,,a5,"), vec!["a1", "a2", "a3", "a4", "a5"]);
        // Width from the first bound; a bound past it grows; `[5-]` is `[5]`.
        assert_eq!(e("n[098-101]"), vec!["n098", "n099", "n100", "n101"]);
        assert_eq!(e("n[01-100]").len(), 100);
        assert_eq!(e("n[5-]"), vec!["n5"]);
        assert_eq!(e("n[0]"), vec!["n0"]);
        // Several ranges and lists in one bracket, and several brackets.
        assert_eq!(e("n[1-2,5,7-8]"), vec!["n1", "n2", "n5", "n7", "n8"]);
        // Refused as hostlist.c refuses them: reversed, negative, empty entry or bound,
        // and no boxes.
        for bad in [
            "n[2-1]", "n[--1]", "n[1,]", "n[,1]", "n[-1]", "n[1x2]", "n[]",
        ] {
            assert!(expand(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn several_bracket_groups_multiply() {
        assert_eq!(
            e("r[1-2]-n[01-02]"),
            vec!["r1-n01", "r1-n02", "r2-n01", "r2-n02"]
        );
    }

    #[test]
    fn bad_expressions_are_refused_not_guessed() {
        assert!(matches!(
            expand("gpu[001-003"),
            Err(HostlistError::Brackets(_))
        ));
        assert!(matches!(expand("gpu]1["), Err(HostlistError::Brackets(_))));
        assert!(matches!(expand("gpu[3-1]"), Err(HostlistError::Range(_))));
        assert!(matches!(expand("gpu[a-b]"), Err(HostlistError::Range(_))));
        assert!(matches!(expand("gpu[-5]"), Err(HostlistError::Range(_))));
        assert!(matches!(
            expand("gpu[0-99999999999]"),
            Err(HostlistError::TooMany(_))
        ));
        assert!(matches!(
            expand("a[0-999]b[0-999]"),
            Err(HostlistError::TooMany(_))
        ));
    }

    #[test]
    fn compress_inverts_expand() {
        let names = e("gpu[001-064,070],dgx-[1-4],login1");
        assert_eq!(compress(&names), "gpu[001-064,070],dgx-[1-4],login1");
        assert_eq!(e(&compress(&names)), names);
        assert_eq!(compress(&["n1".into()]), "n1");
    }
}
