//! Test helpers that hold the hand-written OpenAPI document
//! (doc/admin-api.yaml) to the typed answers: a schema's `required` fields
//! are the fields its type writes.

/// The `required` list of the schema found by following `path` in
/// doc/admin-api.yaml: the first line is a component schema (`Worker`)
/// or a route (`/v2/RepairBlocks`), each next one a key below the
/// previous; the list is the first `required: [...]` after the last
/// (written on one line: the file writes them so).
pub fn required_in_doc(path: &[&str]) -> Vec<String> {
    let (doc, at) = locate(path);
    let list = &doc[at..][doc[at..].find("required: [").expect("a required list")..];
    let list = &list["required: [".len()..list.find(']').expect("a closed list")];
    let mut v: Vec<String> = list.split(',').map(|f| f.trim().to_owned()).collect();
    v.sort();
    v
}

/// The property names of the schema found by following `path` (as
/// [`required_in_doc`]): the keys one level below its `properties:`.
pub fn properties_in_doc(path: &[&str]) -> Vec<String> {
    let (doc, mut at) = locate(path);
    at += doc[at..].find("properties:").expect("properties");
    let line_start = doc[..at].rfind('\n').expect("a line") + 1;
    let indent = at - line_start;
    let mut v: Vec<String> = doc[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.len() - l.trim_start().len() > indent)
        .filter(|l| l.len() - l.trim_start().len() == indent + 2)
        .map(|l| l.trim_start().split(':').next().unwrap_or("").to_owned())
        .collect();
    v.sort();
    v
}

/// The document, and where `path` leads in it (see [`required_in_doc`]).
fn locate(path: &[&str]) -> (&'static str, usize) {
    let doc = include_str!("../../../../doc/admin-api.yaml");
    let (first, rest) = path.split_first().expect("a path");
    let anchor = if first.starts_with('/') {
        format!("\n  {first}:\n")
    } else {
        format!("\n    {first}:\n")
    };
    let mut at = doc
        .find(&anchor)
        .unwrap_or_else(|| panic!("{first} in doc/admin-api.yaml"));
    for key in rest {
        at += doc[at..]
            .find(&format!(" {key}:"))
            .unwrap_or_else(|| panic!("{key} under {first} in doc/admin-api.yaml"));
    }
    (doc, at)
}

/// The fields `answer` writes, sorted.
pub fn fields(answer: impl serde::Serialize) -> Vec<String> {
    serde_json::to_value(answer)
        .expect("answers serialize")
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect()
}
