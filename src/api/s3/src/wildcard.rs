//! The wildcards of policy documents: `*` matches any run of characters
//! (`/` included), `?` any one character.

/// Whether `text` matches `pattern`, ASCII case-insensitively if asked.
/// Linear in practice: the classic single-backtrack match of `*`, at
/// worst `pattern.len() × text.len()` steps (both bounded by the request
/// and the 20 KB policy).
pub fn matches(pattern: &str, text: &str, ignore_case: bool) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let eq = |a: char, b: char| {
        if ignore_case {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was, and the text position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && eq(p[pi], t[ti]))) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            // Let the last `*` take one more character.
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn stars_and_question_marks() {
        assert!(matches("*", "", false));
        assert!(matches("*", "anything/at/all", false));
        assert!(matches("s3:Get*", "s3:GetObject", false));
        assert!(matches("s3:get*", "s3:GetObject", true));
        assert!(!matches("s3:get*", "s3:GetObject", false));
        assert!(matches(
            "arn:aws:s3:::b/home/*",
            "arn:aws:s3:::b/home/x/y",
            false
        ));
        assert!(!matches(
            "arn:aws:s3:::b/home/*",
            "arn:aws:s3:::b/homes",
            false
        ));
        assert!(matches("a?c", "abc", false));
        assert!(!matches("a?c", "ac", false));
        assert!(matches("*a*b*c*", "xxaxxbxxcxx", false));
        assert!(!matches("*a*b*c", "xxaxxbxxcxx", false));
        assert!(matches("a**b", "ab", false));
        assert!(!matches("", "a", false));
        assert!(matches("", "", false));
        assert!(matches("é*", "éa", false));
    }

    #[test]
    fn a_long_text_against_many_stars_stays_fast() {
        let text = "a".repeat(5000);
        let pattern = format!("{}b", "*a".repeat(200));
        let start = std::time::Instant::now();
        assert!(!matches(&pattern, &text, false));
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }
}
