//! Text that crosses the plugin boundary: every string a plugin hands the
//! host (its `info`, its errors, its log lines, its panic message) is cut to
//! a bound and stripped of terminal control sequences before anything shows
//! or stores it, so a plugin can neither flood a report nor repaint a terminal.

/// The most bytes of one error message or log line kept from a plugin.
pub const MESSAGE_BYTES: usize = 4096;

/// `text` as one printable line of at most `max` bytes: escape sequences
/// (CSI, OSC and the rest) and other control characters removed, line breaks
/// and tabs turned into spaces, bidirectional overrides dropped, and what
/// passes the bound replaced by a note of how much was cut.
pub fn clean_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            // C1 control introducers act like ESC on some terminals.
            '\u{9b}' | '\u{9d}' | '\u{90}' | '\u{9e}' | '\u{9f}' => skip_until_terminator(&mut chars, c),
            '\n' | '\r' | '\t' => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            c if c.is_control() || is_bidi_control(c) => {}
            c => out.push(c),
        }
    }
    let trimmed = out.trim();
    if trimmed.len() <= max {
        return trimmed.to_string();
    }
    let mut end = max;
    while !trimmed.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes cut)", &trimmed[..end], trimmed.len() - end)
}

/// Explicit directional formatting, which can make text read differently
/// from what it is.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// Skip the rest of an escape sequence whose ESC was just read.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        // CSI: parameters and intermediates, then one final byte.
        Some('[') => skip_until_terminator(chars, '\u{9b}'),
        // OSC, DCS, SOS, PM, APC: a string ended by BEL or ST.
        Some(']' | 'P' | 'X' | '^' | '_') => skip_until_terminator(chars, '\u{9d}'),
        // Two-character sequences (and a lone ESC at the end).
        _ => {}
    }
}

/// Skip a CSI sequence (`kind` = CSI) up to its final byte, or a string
/// sequence up to BEL, ESC \ or ST.
fn skip_until_terminator(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, kind: char) {
    if kind == '\u{9b}' {
        for c in chars.by_ref() {
            if ('\u{40}'..='\u{7e}').contains(&c) {
                return;
            }
        }
        return;
    }
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_controls_are_removed() {
        assert_eq!(clean_line("\u{1b}[2J\u{1b}[1;31mred\u{1b}[0m text", 100), "red text");
        assert_eq!(clean_line("a\u{1b}]0;title\u{7}b\u{1b}]8;;http://x\u{1b}\\c", 100), "abc");
        assert_eq!(clean_line("one\nerror: forged\r\n\ttwo", 100), "one error: forged two");
        assert_eq!(clean_line("x\u{0}\u{8}\u{7f}y\u{202e}z\u{9b}31mw", 100), "xyzw");
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary() {
        let text = "é".repeat(10);
        let cut = clean_line(&text, 5);
        assert!(cut.starts_with("éé…"), "{cut}");
        assert!(cut.ends_with("(16 more bytes cut)"), "{cut}");
        assert_eq!(clean_line("short", 5), "short");
    }
}
