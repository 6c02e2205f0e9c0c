//! Checks the module map of `lib.rs`: every module uses only modules of its own layer or of the
//! layers below it. A module added to the addon must be placed in a layer here.

/// The layers, bottom first: the rank of a module is the index of its layer.
const LAYERS: &[&[&str]] = &[
  &["errors", "facts"],
  &["js_memory"],
  &["layout"],
  &["storage"],
  &["handle", "slots"],
  &["own_capsule"],
  &["cuda"],
  &["ops"],
  &["binding", "exchange"],
];

/// Every `.rs` file under `src/` (this file excepted), read from disk when the test runs, by
/// the top-level module it belongs to: the first path component, without `.rs`. Walking the
/// folder rather than keeping a list means a new file is checked the moment it exists.
fn sources() -> Vec<(String, String, String)> {
  fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
      .expect("src/ is readable")
      .map(|entry| entry.expect("a directory entry").path())
      .collect();
    entries.sort();
    for path in entries {
      if path.is_dir() {
        walk(&path, root, out);
        continue;
      }
      if path.extension().is_none_or(|ext| ext != "rs") {
        continue;
      }
      let relative = path
        .strip_prefix(root)
        .expect("under src/")
        .to_string_lossy()
        .replace('\\', "/");
      let module = relative
        .split('/')
        .next()
        .expect("a first component")
        .trim_end_matches(".rs")
        .to_string();
      if module == "lib" || module == "layering" {
        continue;
      }
      let text = std::fs::read_to_string(&path).expect("a readable source");
      out.push((module, relative, text));
    }
  }
  let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
  let mut out = Vec::new();
  walk(&root, &root, &mut out);
  out
}

fn rank(module: &str) -> Option<usize> {
  LAYERS.iter().position(|layer| layer.contains(&module))
}

fn identifier(text: &str) -> &str {
  let end = text
    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
    .unwrap_or(text.len());
  &text[..end]
}

/// The top-level modules `source` names through `crate::` (in paths and `use` groups).
fn crate_modules(source: &str) -> Vec<&str> {
  let mut found = Vec::new();
  for (at, _) in source.match_indices("crate::") {
    let rest = &source[at + "crate::".len()..];
    if let Some(group) = rest.strip_prefix('{') {
      // `use crate::{a::x, b}`: the names at the group's first level.
      let mut depth = 0;
      let mut start = true;
      for (index, c) in group.char_indices() {
        match c {
          '{' => depth += 1,
          '}' if depth == 0 => break,
          '}' => depth -= 1,
          ',' if depth == 0 => start = true,
          c if start && !c.is_whitespace() => {
            found.push(identifier(&group[index..]));
            start = false;
          }
          _ => {}
        }
      }
    } else {
      found.push(identifier(rest));
    }
  }
  found
}

#[test]
fn layering_is_one_way() {
  let mut violations = Vec::new();
  for (module, file, source) in sources() {
    let Some(own) = rank(&module) else {
      violations.push(format!("{file} belongs to `{module}`, which has no layer"));
      continue;
    };
    for used in crate_modules(&source) {
      match rank(used) {
        Some(used_rank) if used_rank <= own => {}
        Some(_) => violations.push(format!("{file} uses `{used}`, a higher layer")),
        None => violations.push(format!("{file} uses `{used}`, which has no layer")),
      }
    }
  }
  assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn every_module_has_a_layer_and_its_sources_are_checked() {
  let lib = include_str!("lib.rs");
  for line in lib.lines() {
    let Some(name) = line
      .strip_prefix("mod ")
      .map(|rest| rest.trim_end_matches(';'))
    else {
      continue;
    };
    if name == "layering" {
      continue;
    }
    assert!(rank(name).is_some(), "module `{name}` is in no layer");
    assert!(
      sources().iter().any(|(module, _, _)| module == name),
      "no source of module `{name}` is checked"
    );
  }
}

/// Argument conversion is the binding layer's (the module map in lib.rs): a JS `BigInt` is read
/// there, and the layers below take Rust values (`Stream`, `i128`). `src/cuda.rs` parsed the
/// stream bigints of `binding::fast` and `binding::cuda` until they moved to `binding::args`.
#[test]
fn js_bigints_are_converted_in_the_binding_layer_only() {
  let outside: Vec<String> = sources()
    .into_iter()
    .filter(|(module, _, source)| module != "binding" && source.contains("BigInt"))
    .map(|(_, file, _)| file)
    .collect();
  assert!(
    outside.is_empty(),
    "BigInt outside src/binding/: {outside:?}"
  );
}

#[test]
fn the_check_sees_every_form_of_use() {
  let source = "use crate::errors::fail;\nuse crate::{handle::Handle, js_memory};\n\
                let x = crate::cuda::device_of(y);\n";
  assert_eq!(
    crate_modules(source),
    ["errors", "handle", "js_memory", "cuda"]
  );
  // A lower layer naming a higher one is caught.
  assert!(rank("cuda") > rank("storage"));
}
