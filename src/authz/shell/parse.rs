//! A focused, bounded tokenizer/parser for POSIX-sh/bash command lines.
//!
//! Why not a crate: the parsers that cover the grammar either compile C
//! (tree-sitter) or pull a large dependency tree whose AST we would still
//! have to walk in full (brush-parser); the word-level crates (`shlex`,
//! `shell-words`) do not know operators, substitutions or here-documents.
//! Authorization needs something narrower and stricter: find *every simple
//! command the shell would run*, and fail (→ hold) on anything it does not
//! model, instead of guessing. This module does exactly that.
//!
//! Modelled: `&& || ; | |& &`, newlines, comments, `( … )` subshells,
//! `{ …; }` groups and the reserved words around compound commands, `$( … )`,
//! backticks, `<( … )`/`>( … )`, `$(( … ))`, `${ … }`, `$VAR`, single and
//! double quotes, `$'…'` ANSI-C quoting, backslash escapes and line
//! continuations, redirections with fd prefixes, here-documents (bodies are
//! scanned for substitutions unless the delimiter is quoted).
//! Not modelled (a parse failure, hence a hold): `case` patterns, function
//! definitions, `$( … )` inside `${ … }` or `$(( … ))`, unterminated quotes.

use super::{RawCommand, Redirect, Word};

/// Longest command line analysed; longer input is a failure (a hold).
pub const MAX_INPUT: usize = 64 * 1024;
/// Deepest nesting of subshells, substitutions and `sh -c` payloads.
pub const MAX_DEPTH: usize = 12;
/// Most simple commands one input may contain.
pub const MAX_COMMANDS: usize = 512;

// Reserved words that may precede a command (skipped at command
// position) and those that close a compound command (separators): the
// catalogue owns them, so its argv join quotes exactly what this parser
// would read as a keyword.
use crate::catalogue::{SHELL_CLOSE_WORDS as CLOSE_WORDS, SHELL_PREFIX_WORDS as PREFIX_WORDS};

/// Where commands accumulate while parsing.
#[derive(Default)]
pub(crate) struct Collector {
    pub commands: Vec<RawCommand>,
    next_pipeline: usize,
}

impl Collector {
    fn new_pipeline(&mut self) -> usize {
        self.next_pipeline += 1;
        self.next_pipeline
    }
}

pub(crate) type PResult<T> = Result<T, String>;

struct Parser<'a> {
    s: &'a [char],
    pos: usize,
    depth: usize,
    /// Here-documents whose bodies start at the next newline: (delimiter, strip tabs, expand).
    pending_heredocs: Vec<(String, bool, bool)>,
}

/// Parse `input` at nesting `depth`, appending every simple command found.
pub(crate) fn parse_into(input: &str, depth: usize, out: &mut Collector) -> PResult<()> {
    if input.len() > MAX_INPUT {
        return Err(format!(
            "command is {} bytes; longer than the {} analysed",
            input.len(),
            MAX_INPUT
        ));
    }
    if depth > MAX_DEPTH {
        return Err(format!("nesting deeper than {MAX_DEPTH} levels"));
    }
    let chars: Vec<char> = input.chars().collect();
    let mut p = Parser {
        s: &chars,
        pos: 0,
        depth,
        pending_heredocs: Vec::new(),
    };
    p.list(None, out)?;
    if p.pos < p.s.len() {
        return Err(format!("unexpected `{}` at offset {}", p.s[p.pos], p.pos));
    }
    Ok(())
}

fn is_meta(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>'
    )
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.pos).copied()
    }
    fn peek_at(&self, n: usize) -> Option<char> {
        self.s.get(self.pos + n).copied()
    }
    fn starts_with(&self, t: &str) -> bool {
        t.chars()
            .enumerate()
            .all(|(k, c)| self.s.get(self.pos + k) == Some(&c))
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.pos += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.pos += 2,
                _ => break,
            }
        }
    }

    fn skip_comment(&mut self) {
        if self.peek() == Some('#') {
            while let Some(c) = self.peek() {
                if c == '\n' {
                    break;
                }
                self.pos += 1;
            }
        }
    }

    /// A newline: consume pending here-document bodies after it.
    fn newline(&mut self, out: &mut Collector) -> PResult<()> {
        self.pos += 1;
        let docs = std::mem::take(&mut self.pending_heredocs);
        for (delim, strip, expand) in docs {
            let mut body = String::new();
            loop {
                if self.pos >= self.s.len() {
                    break; // bash warns and runs; the body is everything left
                }
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos] != '\n' {
                    self.pos += 1;
                }
                let line: String = self.s[start..self.pos].iter().collect();
                if self.pos < self.s.len() {
                    self.pos += 1;
                }
                let cmp = if strip {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if cmp == delim {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if expand {
                scan_substitutions(&body, self.depth + 1, out)?;
            }
        }
        Ok(())
    }

    /// A list of pipelines, up to `close` (`)` of a subshell/substitution) or the end.
    fn list(&mut self, close: Option<char>, out: &mut Collector) -> PResult<()> {
        // After `&&`/`||` a command must follow (newlines may come between).
        let mut need_command = false;
        loop {
            self.skip_blanks();
            self.skip_comment();
            if need_command && matches!(self.peek(), None | Some(')' | ';' | '&' | '|')) {
                return Err(format!(
                    "`&&`/`||` without a command after it at offset {}",
                    self.pos
                ));
            }
            match self.peek() {
                None => {
                    return if close.is_some() {
                        Err("missing `)`".into())
                    } else {
                        Ok(())
                    };
                }
                Some(')') => {
                    return if close == Some(')') {
                        self.pos += 1;
                        Ok(())
                    } else {
                        Err(format!("unexpected `)` at offset {}", self.pos))
                    };
                }
                Some('\n') => self.newline(out)?,
                Some(';') => self.pos += 1,
                Some('&') if self.peek_at(1) == Some('&') => {
                    self.pos += 2;
                    need_command = true;
                }
                Some('|') if self.peek_at(1) == Some('|') => {
                    self.pos += 2;
                    need_command = true;
                }
                Some('&') | Some('|') => {
                    return Err(format!(
                        "`{}` without a command before it at offset {}",
                        self.peek().unwrap_or(' '),
                        self.pos
                    ))
                }
                Some(_) => {
                    self.pipeline(out)?;
                    need_command = false;
                }
            }
        }
    }

    /// One pipeline; marks its commands as background when it ends with `&`.
    fn pipeline(&mut self, out: &mut Collector) -> PResult<()> {
        let id = out.new_pipeline();
        let first = out.commands.len();
        let mut index = 0usize;
        loop {
            self.command(id, index, out)?;
            self.skip_blanks();
            if self.starts_with("||") {
                break;
            }
            if self.starts_with("|&") {
                self.pos += 2;
            } else if self.peek() == Some('|') {
                self.pos += 1;
            } else {
                break;
            }
            index += 1;
            self.skip_blanks();
            while self.peek() == Some('\n') {
                self.newline(out)?;
                self.skip_blanks();
            }
            if matches!(self.peek(), None | Some(')' | ';' | '&' | '|')) {
                return Err(format!(
                    "`|` without a command after it at offset {}",
                    self.pos
                ));
            }
        }
        if self.peek() == Some('&') && self.peek_at(1) != Some('&') && self.peek_at(1) != Some('>')
        {
            self.pos += 1;
            for c in &mut out.commands[first..] {
                c.background = true;
            }
        }
        Ok(())
    }

    /// One command: a subshell, a group, or a simple command.
    fn command(&mut self, pipeline: usize, index: usize, out: &mut Collector) -> PResult<()> {
        if out.commands.len() >= MAX_COMMANDS {
            return Err(format!("more than {MAX_COMMANDS} commands"));
        }
        let mut cmd = RawCommand {
            pipeline,
            pipe_index: index,
            depth: self.depth,
            ..RawCommand::default()
        };
        let mut at_start = true;
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else { break };
            // `#` at the start of a token begins a comment (inside a word it does not).
            if c == '#' {
                self.skip_comment();
                continue;
            }
            if c == '(' {
                if !at_start {
                    return Err(format!(
                        "`(` after a word at offset {} (function definitions are not analysed)",
                        self.pos
                    ));
                }
                self.pos += 1;
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(format!("nesting deeper than {MAX_DEPTH} levels"));
                }
                self.list(Some(')'), out)?;
                self.depth -= 1;
                at_start = false;
                continue;
            }
            if matches!(c, '<' | '>') || (c == '&' && self.peek_at(1) == Some('>')) {
                if matches!(c, '<' | '>') && self.peek_at(1) == Some('(') {
                    let w = self.word(out)?;
                    cmd.words.push(w);
                    at_start = false;
                    continue;
                }
                let r = self.redirect(None, out)?;
                cmd.redirects.push(r);
                continue;
            }
            if is_meta(c) {
                break;
            }
            let word = self.word(out)?;
            // An all-digit word glued to `<`/`>` is an fd prefix.
            if !word.quoted
                && !word.text.is_empty()
                && word.text.chars().all(|d| d.is_ascii_digit())
                && matches!(self.peek(), Some('<' | '>'))
            {
                let r = self.redirect(Some(word.text), out)?;
                cmd.redirects.push(r);
                continue;
            }
            if cmd.words.is_empty() && !word.quoted {
                if PREFIX_WORDS.contains(&word.text.as_str()) {
                    at_start = true;
                    continue;
                }
                if CLOSE_WORDS.contains(&word.text.as_str()) {
                    at_start = true;
                    continue;
                }
                if word.text == "case" || word.text == "function" || word.text == "select" {
                    return Err(format!("`{}` is not analysed", word.text));
                }
                if is_assignment(&word.text) {
                    cmd.assignments.push(word);
                    at_start = false;
                    continue;
                }
            }
            cmd.words.push(word);
            at_start = false;
        }
        if !cmd.words.is_empty() || !cmd.assignments.is_empty() || !cmd.redirects.is_empty() {
            out.commands.push(cmd);
        }
        Ok(())
    }

    /// A redirection operator and its target word.
    fn redirect(&mut self, fd: Option<String>, out: &mut Collector) -> PResult<Redirect> {
        const OPS: &[&str] = &[
            "&>>", "<<<", "<<-", "&>", ">>", "<<", ">&", "<&", ">|", "<>", ">", "<",
        ];
        let op = OPS
            .iter()
            .find(|o| self.starts_with(o))
            .copied()
            .ok_or_else(|| format!("bad redirection at offset {}", self.pos))?;
        self.pos += op.chars().count();
        self.skip_blanks();
        if matches!(self.peek(), None | Some('\n' | ';' | '&' | '|' | ')')) {
            return Err(format!("redirection `{op}` without a target"));
        }
        let target = self.word(out)?;
        if op == "<<" || op == "<<-" {
            let expand = !target.quoted;
            self.pending_heredocs
                .push((target.text.clone(), op == "<<-", expand));
        }
        Ok(Redirect {
            fd,
            op: op.to_string(),
            target,
        })
    }

    /// One word, with quotes removed and substitutions parsed as nested commands.
    fn word(&mut self, out: &mut Collector) -> PResult<Word> {
        let mut w = Word::default();
        // Process substitution stands alone as a word.
        if matches!(self.peek(), Some('<' | '>')) && self.peek_at(1) == Some('(') {
            self.pos += 2;
            self.nested_list(out)?;
            w.text.push_str("<(…)");
            w.dynamic = true;
            return Ok(w);
        }
        while let Some(c) = self.peek() {
            if is_meta(c) {
                break;
            }
            match c {
                '\\' => {
                    match self.peek_at(1) {
                        Some('\n') => {}
                        Some(n) => {
                            w.text.push(n);
                            w.quoted = true;
                        }
                        None => return Err("trailing backslash".into()),
                    }
                    self.pos += 2;
                }
                '\'' => {
                    self.pos += 1;
                    w.quoted = true;
                    loop {
                        match self.peek() {
                            None => return Err("unterminated single quote".into()),
                            Some('\'') => {
                                self.pos += 1;
                                break;
                            }
                            Some(ch) => {
                                w.text.push(ch);
                                self.pos += 1;
                            }
                        }
                    }
                }
                '"' => {
                    self.pos += 1;
                    w.quoted = true;
                    self.double_quoted(&mut w, out)?;
                }
                '`' => {
                    self.pos += 1;
                    self.backtick(out)?;
                    w.text.push_str("`…`");
                    w.dynamic = true;
                }
                '$' => self.dollar(&mut w, out)?,
                '*' | '?' | '[' => {
                    w.glob = true;
                    w.text.push(c);
                    self.pos += 1;
                }
                _ => {
                    w.text.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok(w)
    }

    fn double_quoted(&mut self, w: &mut Word, out: &mut Collector) -> PResult<()> {
        loop {
            match self.peek() {
                None => return Err("unterminated double quote".into()),
                Some('"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some('\\') => {
                    match self.peek_at(1) {
                        Some('\n') => {}
                        Some(n @ ('$' | '`' | '"' | '\\')) => w.text.push(n),
                        Some(n) => {
                            w.text.push('\\');
                            w.text.push(n);
                        }
                        None => return Err("unterminated double quote".into()),
                    }
                    self.pos += 2;
                }
                Some('`') => {
                    self.pos += 1;
                    self.backtick(out)?;
                    w.text.push_str("`…`");
                    w.dynamic = true;
                }
                Some('$') => self.dollar(w, out)?,
                Some(c) => {
                    w.text.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// `$…` in any of its forms; `self.pos` is at the `$`.
    fn dollar(&mut self, w: &mut Word, out: &mut Collector) -> PResult<()> {
        match self.peek_at(1) {
            Some('(') if self.peek_at(2) == Some('(') => {
                self.pos += 3;
                let body = self.balanced(')', '(')?;
                if self.peek() != Some(')') {
                    return Err("unterminated `$((`".into());
                }
                self.pos += 1;
                if body.contains("$(") || body.contains('`') {
                    return Err("command substitution inside `$(( ))` is not analysed".into());
                }
                w.text.push_str("$((…))");
                w.dynamic = true;
            }
            Some('(') => {
                self.pos += 2;
                self.nested_list(out)?;
                w.text.push_str("$(…)");
                w.dynamic = true;
            }
            Some('{') => {
                self.pos += 2;
                let body = self.balanced('}', '{')?;
                if body.contains("$(") || body.contains('`') {
                    return Err("command substitution inside `${ }` is not analysed".into());
                }
                w.text.push_str("${");
                w.text.push_str(&body);
                w.text.push('}');
                w.dynamic = true;
            }
            Some('\'') => {
                self.pos += 2;
                w.quoted = true;
                self.ansi_c(w)?;
            }
            Some('"') => {
                self.pos += 2;
                w.quoted = true;
                self.double_quoted(w, out)?;
            }
            Some(c) if c.is_ascii_alphanumeric() || c == '_' => {
                self.pos += 1;
                w.text.push('$');
                if c.is_ascii_digit() {
                    w.text.push(c);
                    self.pos += 1;
                } else {
                    while let Some(n) = self.peek() {
                        if n.is_ascii_alphanumeric() || n == '_' {
                            w.text.push(n);
                            self.pos += 1;
                        } else {
                            break;
                        }
                    }
                }
                w.dynamic = true;
            }
            Some(c @ ('@' | '*' | '#' | '?' | '-' | '$' | '!')) => {
                self.pos += 2;
                w.text.push('$');
                w.text.push(c);
                w.dynamic = true;
            }
            _ => {
                w.text.push('$');
                self.pos += 1;
            }
        }
        Ok(())
    }

    /// Text up to the `close` matching an already-consumed `open` (not consumed).
    fn balanced(&mut self, close: char, open: char) -> PResult<String> {
        let mut depth = 0usize;
        let mut body = String::new();
        while let Some(c) = self.peek() {
            if c == close {
                if depth == 0 {
                    self.pos += 1;
                    return Ok(body);
                }
                depth -= 1;
            } else if c == open {
                depth += 1;
            }
            body.push(c);
            self.pos += 1;
        }
        Err(format!("missing `{close}`"))
    }

    /// `$'…'`: decode the escapes bash decodes (so `$'\x72m'` is `rm`).
    fn ansi_c(&mut self, w: &mut Word) -> PResult<()> {
        self.pos = super::quote::ansi_c(self.s, self.pos, &mut w.text)?;
        Ok(())
    }

    /// `$(`/`<(` body: a nested list up to the matching `)`.
    fn nested_list(&mut self, out: &mut Collector) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nesting deeper than {MAX_DEPTH} levels"));
        }
        let saved = std::mem::take(&mut self.pending_heredocs);
        self.list(Some(')'), out)?;
        self.pending_heredocs = saved;
        self.depth -= 1;
        Ok(())
    }

    /// A backtick substitution; `self.pos` is just after the opening backtick.
    fn backtick(&mut self, out: &mut Collector) -> PResult<()> {
        let mut body = String::new();
        loop {
            match self.peek() {
                None => return Err("unterminated backtick".into()),
                Some('`') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    match self.peek_at(1) {
                        Some(n @ ('`' | '\\' | '$')) => body.push(n),
                        Some(n) => {
                            body.push('\\');
                            body.push(n);
                        }
                        None => return Err("unterminated backtick".into()),
                    }
                    self.pos += 2;
                }
                Some(c) => {
                    body.push(c);
                    self.pos += 1;
                }
            }
        }
        parse_into(&body, self.depth + 1, out)
    }
}

/// Whether an unquoted word at command position is a `NAME=value` prefix.
pub(crate) fn is_assignment(text: &str) -> bool {
    match text.split_once('=') {
        Some((name, _)) => {
            let name = name.strip_suffix('+').unwrap_or(name);
            let mut chars = name.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Find `$( … )` and backtick substitutions in expanding text (here-doc
/// bodies) and parse them as commands.
fn scan_substitutions(text: &str, depth: usize, out: &mut Collector) -> PResult<()> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = Parser {
        s: &chars,
        pos: 0,
        depth,
        pending_heredocs: Vec::new(),
    };
    while let Some(c) = p.peek() {
        match c {
            '\\' => p.pos += 2,
            '$' => {
                let mut w = Word::default();
                p.dollar(&mut w, out)?;
            }
            '`' => {
                p.pos += 1;
                p.backtick(out)?;
            }
            _ => p.pos += 1,
        }
    }
    Ok(())
}
