//! `ssl.principal.mapping.rules`: Kafka's `SslPrincipalMapper`, which turns the subject DN of
//! a client certificate into the principal name.
//!
//! The value is a comma-separated list of rules, tried in order; the first that applies gives
//! the name. `DEFAULT` is the DN itself. `RULE:pattern/replacement/` applies when `pattern`
//! matches the whole DN and gives the DN with `pattern` replaced by `replacement` (`$n` are its
//! groups, `\x` a literal `x`); a trailing `L` or `U` lower- or upper-cases the result. A `/`
//! or `,` inside a pattern or replacement is escaped as `\/` (a `,` needs no escape). When no
//! rule applies the client gets no principal and its connection is refused, as Kafka's
//! `NoMatchingRule`. Patterns use Rust's regex syntax (Java's common subset; no look-around or
//! back-references, refused at startup), matched in linear time.

use regex_automata::meta::Regex;

/// The parsed rules of one listener.
#[derive(Debug, Clone)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        /// `pattern` anchored at both ends: Java's `Matcher.matches`.
        whole: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// Longest rules value accepted (a configuration, not data: bounded all the same).
const MAX_RULES_BYTES: usize = 64 * 1024;

impl SslPrincipalMapper {
    /// Parses `ssl.principal.mapping.rules` (unset means `DEFAULT`).
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.len() > MAX_RULES_BYTES {
            return Err(format!("longer than {MAX_RULES_BYTES} bytes"));
        }
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            let (rule, after) = parse_rule(rest)?;
            rules.extend(rule);
            rest = after.trim_start();
        }
        Ok(SslPrincipalMapper { rules })
    }

    /// The principal name of `dn`, `None` when no rule applies.
    pub fn name(&self, dn: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| rule.apply(dn))
    }
}

/// One rule from the start of `text` and what follows its separating comma (`None` for an
/// empty entry, which Kafka ignores).
fn parse_rule(text: &str) -> Result<(Option<Rule>, &str), String> {
    let invalid = |what: &str| {
        let shown: String = text.chars().take(80).collect();
        Err(format!("invalid rule `{shown}`: {what}"))
    };
    let (rule, after) = if let Some(after) = text.strip_prefix("DEFAULT") {
        (Some(Rule::Default), after)
    } else if let Some(after) = text.strip_prefix("RULE:") {
        let Some((pattern, after)) = until_slash(after) else {
            return invalid("the pattern has no closing /");
        };
        let Some((replacement, after)) = until_slash(after) else {
            return invalid("the replacement has no closing /");
        };
        let (case, after) = match after.chars().next() {
            Some('L') => (Case::Lower, &after[1..]),
            Some('U') => (Case::Upper, &after[1..]),
            _ => (Case::Keep, after),
        };
        let pattern = pattern.replace("\\/", "/");
        let (pattern, whole) = match (
            Regex::new(&pattern),
            Regex::new(&format!(r"\A(?:{pattern})\z")),
        ) {
            (Ok(p), Ok(w)) => (p, w),
            (Err(e), _) | (_, Err(e)) => return invalid(&format!("bad pattern: {e}")),
        };
        (
            Some(Rule::Replace {
                pattern,
                whole,
                replacement: replacement.to_string(),
                case,
            }),
            after,
        )
    } else if text.starts_with(',') {
        (None, text)
    } else {
        return invalid("expected DEFAULT or RULE:pattern/replacement/[LU]");
    };
    let after = after.trim_start();
    match after.strip_prefix(',') {
        Some(next) => Ok((rule, next)),
        None if after.is_empty() => Ok((rule, after)),
        None => invalid(&format!(
            "unexpected `{}` after the rule",
            after.chars().take(20).collect::<String>()
        )),
    }
}

/// The text up to the first `/` not escaped by `\` (escapes kept), and what follows that `/`.
fn until_slash(text: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '/' => return Some((&text[..i], &text[i + 1..])),
            _ => {}
        }
    }
    None
}

impl Rule {
    fn apply(&self, dn: &str) -> Option<String> {
        let (pattern, whole, replacement, case) = match self {
            Rule::Default => return Some(dn.to_string()),
            Rule::Replace {
                pattern,
                whole,
                replacement,
                case,
            } => (pattern, whole, replacement, *case),
        };
        // The pattern must match the whole DN (Java's `Matcher.matches`)...
        if !whole.is_match(dn) {
            return None;
        }
        // ... and then every match is replaced (`String.replaceAll`).
        let mut out = String::new();
        let mut last = 0;
        for caps in pattern.captures_iter(dn) {
            let Some(m) = caps.get_match() else { continue };
            out.push_str(&dn[last..m.start()]);
            expand(replacement, &caps, dn, &mut out);
            last = m.end();
        }
        out.push_str(&dn[last..]);
        Some(match case {
            Case::Keep => out,
            Case::Lower => out.to_lowercase(),
            Case::Upper => out.to_uppercase(),
        })
    }
}

/// Java's replacement syntax: `\x` is `x`, `$n` group n (the longest number naming a group);
/// a `$n` naming no group is literal, as Kafka escapes it.
fn expand(
    replacement: &str,
    caps: &regex_automata::util::captures::Captures,
    dn: &str,
    out: &mut String,
) {
    let groups = caps.group_len().saturating_sub(1);
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '$' => {
                let Some(first) = chars.peek().and_then(|d| d.to_digit(10)) else {
                    out.push('$');
                    continue;
                };
                let Ok(mut group) = usize::try_from(first) else {
                    out.push('$');
                    continue;
                };
                if group > groups {
                    out.push('$');
                    continue;
                }
                chars.next();
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    let Some(longer) = usize::try_from(d)
                        .ok()
                        .and_then(|d| group.checked_mul(10)?.checked_add(d))
                    else {
                        break;
                    };
                    if longer > groups {
                        break;
                    }
                    group = longer;
                    chars.next();
                }
                if let Some(span) = caps.get_group(group) {
                    out.push_str(&dn[span.range()]);
                }
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(rules: &str, dn: &str) -> Option<String> {
        SslPrincipalMapper::parse(rules).unwrap().name(dn)
    }

    /// The examples of Kafka's documentation (security.html, "Customizing SSL User Name") and
    /// of its `SslPrincipalMapperTest`.
    #[test]
    fn kafkas_documented_examples() {
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
                     RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
                     RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\
                     DEFAULT";
        let cases = [
            (
                "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown",
                "serviceuser",
            ),
            (
                "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown",
                "adminuser@admin",
            ),
            ("CN=kafka1.example.com", "kafka1.example.com"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ];
        for (dn, want) in cases {
            assert_eq!(name(rules, dn).as_deref(), Some(want), "{dn}");
        }
        let test_rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,\
            RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
            RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,\
            RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,\
            DEFAULT";
        for (dn, want) in [
            ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
            ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
            ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
            ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ] {
            assert_eq!(name(test_rules, dn).as_deref(), Some(want), "{dn}");
        }
        // A DN with an escaped comma (Kafka's testCommaWithWhitespace).
        assert_eq!(
            name(
                r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT",
                r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz"
            )
            .as_deref(),
            Some(r"Tkac\, Adam")
        );
        // Escaped slashes and commas in pattern and replacement.
        let escaped = r"RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1\/$2\/$3/";
        assert_eq!(name(escaped, "CN=a,OU=b,O=c").as_deref(), Some("a/b/c"));
        // Newlines and spaces between rules, as the docs write them.
        let spaced = "RULE:^CN=([^,]*).*$/$1/L ,\n   DEFAULT";
        assert_eq!(name(spaced, "CN=Bob,O=x").as_deref(), Some("bob"));
    }

    /// Kafka's valid rules (`SslPrincipalMapperTest.testValidRules`) and its splitting of
    /// empty entries and spaces.
    #[test]
    fn valid_rules_parse() {
        for good in [
            "DEFAULT",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
            "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
            "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
            "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
            "RULE://,DEFAULT",
            "  RULE:  /     /U   ,DEFAULT  ",
            ",,RULE://,,,DEFAULT,,",
            "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,",
            r"RULE:\**\/+/*/L,RULE:\/*\**/**/",
        ] {
            assert!(SslPrincipalMapper::parse(good).is_ok(), "{good}");
        }
        assert_eq!(
            SslPrincipalMapper::parse(",,RULE://,,,DEFAULT,,")
                .unwrap()
                .rules
                .len(),
            2
        );
    }

    #[test]
    fn no_matching_rule_is_none() {
        assert_eq!(
            name("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=a,OU=Other"),
            None
        );
        assert_eq!(name("", "CN=a"), None, "no rules: nothing applies");
        assert_eq!(name("DEFAULT", "CN=a").as_deref(), Some("CN=a"));
    }

    #[test]
    fn back_references_follow_java() {
        // $4 with three groups is literal; $12 with one group is group 1 then '2'.
        assert_eq!(
            name("RULE:^CN=(a),OU=(b),O=(c)$/$1@$4/", "CN=a,OU=b,O=c").as_deref(),
            Some("a@$4")
        );
        assert_eq!(name("RULE:^CN=(.*)$/$12/", "CN=x").as_deref(), Some("x2"));
        assert_eq!(
            name("RULE:^CN=(.*)$/$0!/", "CN=x").as_deref(),
            Some("CN=x!")
        );
    }

    /// Kafka's invalid rules (`SslPrincipalMapperTest.testInvalidRules`) are refused.
    #[test]
    fn invalid_rules_are_refused() {
        for bad in [
            "default",
            "DEFAUL",
            "DEFAULT/L",
            "DEFAULT/U",
            "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
            "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
            "DEFAULT!",
            "RULE:/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*/$1",
            "RULE:^CN=(.*?),OU=ServiceUsers.*/$1/Lx",
            "RULE:^CN=(.*?),OU=ServiceUsers.*/L",
            "RULE:^CN=(.*?),OU=ServiceUsers.*/$1/Lx",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U U",
            "NOT_A_RULE",
            "RULE:^CN=([/$1/",
        ] {
            assert!(SslPrincipalMapper::parse(bad).is_err(), "{bad}");
        }
        assert!(SslPrincipalMapper::parse(&"D".repeat(MAX_RULES_BYTES + 1)).is_err());
    }
}
