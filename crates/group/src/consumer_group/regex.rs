//! A small regular-expression engine for `subscribed_topic_regex`, because the crate keeps no
//! regex dependency: the RE2 subset topic patterns use (literals, `.`, classes with ranges and
//! `\d \w \s`, groups, `|`, `* + ? {n,m}`, `^ $`), compiled to a Thompson NFA and run as a
//! set-of-states simulation, so matching is linear in the topic name whatever the pattern
//! (a client-supplied pattern cannot make the coordinator backtrack exponentially). Whole-name
//! matching only, as Kafka does. Unsupported syntax is rejected, never guessed.

/// Compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex {
    prog: Vec<Inst>,
}

/// Bounds the compiled size (counted repetition copies its body).
const MAX_INSTS: usize = 20_000;

#[derive(Debug, Clone)]
enum Node {
    Set(Set),
    Start,
    End,
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat(Box<Node>, u32, Option<u32>),
}

#[derive(Debug, Clone)]
struct Set {
    negated: bool,
    items: Vec<Item>,
}

#[derive(Debug, Clone, Copy)]
enum Item {
    Range(char, char),
    Digit(bool),
    Word(bool),
    Space(bool),
    Any,
}

impl Item {
    fn matches(self, c: char) -> bool {
        match self {
            Item::Range(a, b) => a <= c && c <= b,
            Item::Digit(neg) => c.is_ascii_digit() != neg,
            Item::Word(neg) => (c.is_ascii_alphanumeric() || c == '_') != neg,
            Item::Space(neg) => matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c') != neg,
            Item::Any => c != '\n',
        }
    }
}

impl Set {
    fn one(item: Item) -> Self {
        Set {
            negated: false,
            items: vec![item],
        }
    }

    fn matches(&self, c: char) -> bool {
        self.items.iter().any(|i| i.matches(c)) != self.negated
    }
}

#[derive(Debug, Clone)]
enum Inst {
    Char(Set),
    Split(usize, usize),
    Jmp(usize),
    Start,
    End,
    Match,
}

impl Regex {
    /// Parses and compiles; `Err` carries a message for INVALID_REGULAR_EXPRESSION.
    pub fn new(pattern: &str) -> Result<Regex, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut p = Parser { s: &chars, i: 0 };
        let node = p.alt(0)?;
        if p.i != chars.len() {
            return Err(format!("unexpected ')' at {}", p.i));
        }
        let mut prog = Vec::new();
        compile(&node, &mut prog)?;
        prog.push(Inst::Match);
        Ok(Regex { prog })
    }

    /// Whether the whole of `text` matches.
    pub fn is_full_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let n = chars.len();
        let mut current = Vec::new();
        let mut seen = vec![usize::MAX; self.prog.len()];
        self.add(&mut current, &mut seen, 0, 0, n);
        for (i, c) in chars.iter().enumerate() {
            let mut next = Vec::new();
            for pc in &current {
                if let Inst::Char(set) = &self.prog[*pc] {
                    if set.matches(*c) {
                        self.add(&mut next, &mut seen, pc + 1, i + 1, n);
                    }
                }
            }
            if next.is_empty() {
                return false;
            }
            current = next;
        }
        current
            .iter()
            .any(|pc| matches!(self.prog[*pc], Inst::Match))
    }

    /// Adds `pc` and its epsilon closure at position `pos` (iterative: no deep recursion).
    fn add(&self, list: &mut Vec<usize>, seen: &mut [usize], pc: usize, pos: usize, len: usize) {
        let mut stack = vec![pc];
        while let Some(pc) = stack.pop() {
            if seen[pc] == pos {
                continue;
            }
            seen[pc] = pos;
            match &self.prog[pc] {
                Inst::Jmp(t) => stack.push(*t),
                Inst::Split(a, b) => {
                    stack.push(*b);
                    stack.push(*a);
                }
                Inst::Start => {
                    if pos == 0 {
                        stack.push(pc + 1);
                    }
                }
                Inst::End => {
                    if pos == len {
                        stack.push(pc + 1);
                    }
                }
                Inst::Char(_) | Inst::Match => list.push(pc),
            }
        }
    }
}

fn compile(node: &Node, prog: &mut Vec<Inst>) -> Result<(), String> {
    if prog.len() > MAX_INSTS {
        return Err("pattern too large".into());
    }
    match node {
        Node::Set(s) => prog.push(Inst::Char(s.clone())),
        Node::Start => prog.push(Inst::Start),
        Node::End => prog.push(Inst::End),
        Node::Concat(nodes) => {
            for n in nodes {
                compile(n, prog)?;
            }
        }
        Node::Alt(nodes) => {
            // split L1, next; L1: a; jmp end; next: split L2, ... ; last: z
            let mut jumps = Vec::new();
            for (k, n) in nodes.iter().enumerate() {
                if k + 1 < nodes.len() {
                    let split = prog.len();
                    prog.push(Inst::Split(split + 1, 0));
                    compile(n, prog)?;
                    jumps.push(prog.len());
                    prog.push(Inst::Jmp(0));
                    let next = prog.len();
                    prog[split] = Inst::Split(split + 1, next);
                } else {
                    compile(n, prog)?;
                }
            }
            let end = prog.len();
            for j in jumps {
                prog[j] = Inst::Jmp(end);
            }
        }
        Node::Repeat(body, min, max) => {
            for _ in 0..*min {
                compile(body, prog)?;
            }
            match max {
                None => {
                    let split = prog.len();
                    prog.push(Inst::Split(split + 1, 0));
                    compile(body, prog)?;
                    prog.push(Inst::Jmp(split));
                    let end = prog.len();
                    prog[split] = Inst::Split(split + 1, end);
                }
                Some(max) => {
                    let mut splits = Vec::new();
                    for _ in *min..*max {
                        splits.push(prog.len());
                        prog.push(Inst::Split(0, 0));
                        compile(body, prog)?;
                    }
                    let end = prog.len();
                    for s in splits {
                        prog[s] = Inst::Split(s + 1, end);
                    }
                }
            }
        }
    }
    if prog.len() > MAX_INSTS {
        return Err("pattern too large".into());
    }
    Ok(())
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
}

/// Nesting bound for groups, so parsing a hostile pattern cannot exhaust the stack.
const MAX_DEPTH: usize = 100;

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn alt(&mut self, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err("groups nested too deeply".into());
        }
        let mut branches = vec![self.concat(depth)?];
        while self.peek() == Some('|') {
            self.i += 1;
            branches.push(self.concat(depth)?);
        }
        Ok(if branches.len() == 1 {
            branches.pop().unwrap_or(Node::Concat(vec![]))
        } else {
            Node::Alt(branches)
        })
    }

    fn concat(&mut self, depth: usize) -> Result<Node, String> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom(depth)?;
            items.push(self.quantified(atom)?);
        }
        Ok(Node::Concat(items))
    }

    fn quantified(&mut self, mut atom: Node) -> Result<Node, String> {
        loop {
            let (min, max) = match self.peek() {
                Some('*') => {
                    self.i += 1;
                    (0, None)
                }
                Some('+') => {
                    self.i += 1;
                    (1, None)
                }
                Some('?') => {
                    self.i += 1;
                    (0, Some(1))
                }
                Some('{') => match self.counted() {
                    Some(q) => q,
                    None => return Ok(atom),
                },
                _ => return Ok(atom),
            };
            if matches!(atom, Node::Start | Node::End) {
                return Err("quantifier after an anchor".into());
            }
            if max.is_some_and(|m| m < min) {
                return Err("bad repetition range".into());
            }
            if min > 1000 || max.is_some_and(|m| m > 1000) {
                return Err("repetition count too large".into());
            }
            // A lazy marker does not change whether a whole name matches.
            if self.peek() == Some('?') {
                self.i += 1;
            }
            if matches!(self.peek(), Some('*' | '+' | '?')) {
                return Err("invalid nested repetition operator".into());
            }
            atom = Node::Repeat(Box::new(atom), min, max);
        }
    }

    /// `{n}`, `{n,}`, `{n,m}`; `None` (and no input consumed) if not a repetition, in which
    /// case RE2 reads `{` literally.
    fn counted(&mut self) -> Option<(u32, Option<u32>)> {
        let start = self.i;
        self.i += 1;
        let min = self.number();
        let result = match (min, self.peek()) {
            (Some(n), Some('}')) => Some((n, Some(n))),
            (Some(n), Some(',')) => {
                self.i += 1;
                let max = self.number();
                if self.peek() == Some('}') {
                    Some((n, max))
                } else {
                    None
                }
            }
            _ => None,
        };
        if result.is_some() {
            self.i += 1; // '}'
        } else {
            self.i = start;
        }
        result
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        if self.i == start || self.i - start > 6 {
            return None;
        }
        self.s[start..self.i]
            .iter()
            .collect::<String>()
            .parse()
            .ok()
    }

    fn atom(&mut self, depth: usize) -> Result<Node, String> {
        let Some(c) = self.peek() else {
            return Err("unexpected end".into());
        };
        self.i += 1;
        Ok(match c {
            '(' => {
                if self.peek() == Some('?') {
                    if self.s.get(self.i + 1) == Some(&':') {
                        self.i += 2;
                    } else {
                        return Err("unsupported group flags".into());
                    }
                }
                let inner = self.alt(depth + 1)?;
                if self.peek() != Some(')') {
                    return Err("missing ')'".into());
                }
                self.i += 1;
                inner
            }
            '[' => Node::Set(self.class()?),
            '.' => Node::Set(Set::one(Item::Any)),
            '^' => Node::Start,
            '$' => Node::End,
            '\\' => Node::Set(Set::one(self.escape()?)),
            '*' | '+' | '?' => {
                return Err(format!("missing argument to repetition operator '{c}'"))
            }
            c => Node::Set(Set::one(Item::Range(c, c))),
        })
    }

    /// After a backslash.
    fn escape(&mut self) -> Result<Item, String> {
        let Some(c) = self.peek() else {
            return Err("trailing backslash".into());
        };
        self.i += 1;
        Ok(match c {
            'd' => Item::Digit(false),
            'D' => Item::Digit(true),
            'w' => Item::Word(false),
            'W' => Item::Word(true),
            's' => Item::Space(false),
            'S' => Item::Space(true),
            'n' => Item::Range('\n', '\n'),
            't' => Item::Range('\t', '\t'),
            'r' => Item::Range('\r', '\r'),
            'f' => Item::Range('\x0c', '\x0c'),
            'v' => Item::Range('\x0b', '\x0b'),
            c if c.is_ascii_punctuation() => Item::Range(c, c),
            c => return Err(format!("unsupported escape '\\{c}'")),
        })
    }

    /// After `[`.
    fn class(&mut self) -> Result<Set, String> {
        let mut set = Set {
            negated: false,
            items: Vec::new(),
        };
        if self.peek() == Some('^') {
            set.negated = true;
            self.i += 1;
        }
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err("missing ']'".into());
            };
            if c == ']' && !first {
                self.i += 1;
                return Ok(set);
            }
            first = false;
            self.i += 1;
            let lo = if c == '\\' {
                match self.escape()? {
                    Item::Range(a, _) => a,
                    other => {
                        set.items.push(other);
                        continue;
                    }
                }
            } else if c == '[' && self.peek() == Some(':') {
                return Err("POSIX classes are not supported".into());
            } else {
                c
            };
            if self.peek() == Some('-') && self.s.get(self.i + 1).is_some_and(|c| *c != ']') {
                self.i += 1;
                let Some(hc) = self.peek() else {
                    return Err("missing ']'".into());
                };
                self.i += 1;
                let hi = if hc == '\\' {
                    match self.escape()? {
                        Item::Range(a, _) => a,
                        _ => return Err("bad character class range".into()),
                    }
                } else {
                    hc
                };
                if hi < lo {
                    return Err("bad character class range".into());
                }
                set.items.push(Item::Range(lo, hi));
            } else {
                set.items.push(Item::Range(lo, lo));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Regex::new(p).unwrap().is_full_match(t)
    }

    #[test]
    fn matches_whole_names() {
        assert!(m("orders", "orders"));
        assert!(!m("orders", "orders-eu"));
        assert!(m("orders.*", "orders-eu"));
        assert!(m("^orders.*$", "orders"));
        assert!(m("a|b", "b"));
        assert!(!m("a|b", "ab"));
        assert!(m("(foo|bar)-[0-9]+", "bar-42"));
        assert!(!m("(foo|bar)-[0-9]+", "bar-"));
        assert!(m("t\\.\\d{2,3}", "t.123"));
        assert!(!m("t\\.\\d{2,3}", "t.1234"));
        assert!(m("[^_].*", "x_"));
        assert!(!m("[^_].*", "_x"));
        assert!(m("x{2}", "xx"));
        assert!(m("x{2,}", "xxxxx"));
        assert!(m("a{,2}", "a{,2}"));
        assert!(m("[a-c-]+", "a-c"));
        assert!(m("(?:ab)*c", "ababc"));
        assert!(m("", ""));
        assert!(m(".*?x", "aax"));
        assert!(m("[\\w.-]+", "a.b-c_1"));
    }

    #[test]
    fn rejects_bad_patterns() {
        for p in [
            "(", ")", "[a", "*a", "a**", "a{3,1}", "\\", "(?i)a", "\\q", "[z-a]", "a{1001}",
        ] {
            assert!(Regex::new(p).is_err(), "{p:?} should be rejected");
        }
    }

    #[test]
    fn pathological_patterns_stay_linear() {
        let re = Regex::new("(a*)*(a|aa)*b").unwrap();
        assert!(!re.is_full_match(&"a".repeat(249)));
        let deep = "(".repeat(200) + &")".repeat(200);
        assert!(Regex::new(&deep).is_err());
    }
}
