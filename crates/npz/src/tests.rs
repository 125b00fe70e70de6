use super::*;

fn samples() -> Vec<Array> {
    vec![
        Array::F32 {
            shape: vec![2, 3],
            data: vec![1.0, -2.5, 3.25, f32::MIN_POSITIVE, f32::MAX, -0.0],
        },
        Array::F64 {
            shape: vec![3],
            data: vec![1e-300, -7.0, std::f64::consts::PI],
        },
        Array::I64 {
            shape: vec![1],
            data: vec![i64::MIN],
        },
        Array::I32 {
            shape: vec![2, 1, 2],
            data: vec![i32::MAX, -1, 0, 42],
        },
        Array::Bool {
            shape: vec![4],
            data: vec![true, false, false, true],
        },
        Array::U8 {
            shape: vec![2, 2],
            data: vec![0, 1, 254, 255],
        },
    ]
}

/// A scalar and a zero-size array of every dtype.
fn edge_cases() -> Vec<Array> {
    vec![
        Array::F32 {
            shape: vec![],
            data: vec![1.5],
        },
        Array::F64 {
            shape: vec![],
            data: vec![-2.0],
        },
        Array::I64 {
            shape: vec![],
            data: vec![7],
        },
        Array::I32 {
            shape: vec![],
            data: vec![-7],
        },
        Array::Bool {
            shape: vec![],
            data: vec![true],
        },
        Array::U8 {
            shape: vec![],
            data: vec![9],
        },
        Array::F32 {
            shape: vec![0],
            data: vec![],
        },
        Array::F64 {
            shape: vec![3, 0],
            data: vec![],
        },
        Array::I64 {
            shape: vec![0, 5],
            data: vec![],
        },
        Array::I32 {
            shape: vec![0],
            data: vec![],
        },
        Array::Bool {
            shape: vec![2, 0, 2],
            data: vec![],
        },
        Array::U8 {
            shape: vec![0],
            data: vec![],
        },
    ]
}

/// Builds a `.npy` file by hand, for headers `write_npy` never produces.
fn npy_with_header(version: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.as_bytes().to_vec();
    header.push(b'\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn npy_round_trips_every_dtype() {
    for a in samples().into_iter().chain(edge_cases()) {
        let bytes = write_npy(&a);
        let back = read_npy(&bytes).unwrap_or_else(|e| panic!("{a:?}: {e}"));
        assert_eq!(back, a);
        assert_eq!(back.dtype_name(), a.dtype_name());
    }
}

#[test]
fn dtype_names_are_numpys() {
    let names: Vec<&str> = samples().iter().map(Array::dtype_name).collect();
    assert_eq!(
        names,
        ["float32", "float64", "int64", "int32", "bool", "uint8"]
    );
}

#[test]
fn header_is_laid_out_as_numpy_does() {
    // `np.save` of np.zeros((2, 3), np.float32) writes this exact prefix.
    let bytes = write_npy(&Array::F32 {
        shape: vec![2, 3],
        data: vec![0.0; 6],
    });
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    let mut expected = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    expected.extend_from_slice(dict.as_bytes());
    expected.resize(127, b' ');
    expected.push(b'\n');
    assert_eq!(&bytes[..128], &expected[..]);
    assert_eq!(bytes.len(), 128 + 24);
    for a in samples().into_iter().chain(edge_cases()) {
        let bytes = write_npy(&a);
        let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
        assert_eq!((10 + header_len) % 64, 0, "{a:?}");
    }
}

#[test]
fn reads_versions_2_and_3_and_alternate_spellings() {
    let data = f32_bytes(&[1.0, 2.0]);
    for (version, dict) in [
        (
            2,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        ),
        (
            3,
            "{\"shape\": (2,), \"descr\": \"=f4\", \"fortran_order\": False}",
        ),
        (1, "{'descr':'<f4','fortran_order':False,'shape':(2L,)}  "),
    ] {
        let a = read_npy(&npy_with_header(version, dict, &data)).unwrap();
        assert_eq!(
            a,
            Array::F32 {
                shape: vec![2],
                data: vec![1.0, 2.0]
            }
        );
    }
    let a = read_npy(&npy_with_header(
        1,
        "{'descr': '>u1', 'fortran_order': False, 'shape': (1,), }",
        &[5],
    ))
    .unwrap();
    assert_eq!(
        a,
        Array::U8 {
            shape: vec![1],
            data: vec![5]
        }
    );
}

#[test]
fn fortran_order_is_transposed_into_c_order() {
    // The C-order matrix [[0, 1, 2], [3, 4, 5]] stored column by column.
    let column_major = f32_bytes(&[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let dict = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }";
    let a = read_npy(&npy_with_header(1, dict, &column_major)).unwrap();
    assert_eq!(
        a,
        Array::F32 {
            shape: vec![2, 3],
            data: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        }
    );
    // Three dimensions: element (i, j, k) sits at i + 2j + 4k.
    let shape = [2usize, 2, 3];
    let column_major: Vec<u8> = (0..12)
        .map(|f| {
            let (i, j, k) = (f % 2, (f / 2) % 2, f / 4);
            (i * 100 + j * 10 + k) as u8
        })
        .collect();
    let dict = "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 2, 3), }";
    let Array::U8 { data, .. } = read_npy(&npy_with_header(1, dict, &column_major)).unwrap() else {
        panic!("wrong dtype")
    };
    let mut expected = Vec::new();
    for i in 0..shape[0] {
        for j in 0..shape[1] {
            for k in 0..shape[2] {
                expected.push((i * 100 + j * 10 + k) as u8);
            }
        }
    }
    assert_eq!(data, expected);
}

#[test]
fn every_truncation_is_an_error() {
    for a in samples().into_iter().chain(edge_cases()) {
        let bytes = write_npy(&a);
        for cut in 0..bytes.len() {
            let err = read_npy(&bytes[..cut]);
            assert!(err.is_err(), "{a:?} cut at {cut} read as {err:?}");
        }
    }
    let err = read_npy(b"\x93NUMPY\x01\x00\x76\x00{'descr'").unwrap_err();
    assert_eq!(
        err.to_string(),
        "truncated: the header needs 128 bytes, only 18 present"
    );
}

#[test]
fn bad_magic_is_reported() {
    let err = read_npy(b"PK\x03\x04 not an npy file").unwrap_err();
    assert!(matches!(err, NpzError::BadMagic { .. }), "{err}");
    assert!(err.to_string().starts_with("bad magic"), "{err}");
    let err = read_npy(b"").unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad magic: expected \\x93NUMPY, found an empty input"
    );
}

#[test]
fn unsupported_version_is_reported() {
    let mut bytes = write_npy(&samples()[0]);
    bytes[6] = 4;
    let err = read_npy(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsupported .npy format version 4.0 (expected 1.0, 2.0 or 3.0)"
    );
}

#[test]
fn wrong_data_length_names_shape_and_dtype() {
    let a = Array::F32 {
        shape: vec![8, 4],
        data: vec![0.5; 32],
    };
    let mut bytes = write_npy(&a);
    bytes.truncate(bytes.len() - 8);
    let err = read_npy(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "data is 120 bytes, shape (8, 4) float32 needs 128"
    );
    // Trailing bytes are as wrong as missing ones.
    let mut bytes = write_npy(&a);
    bytes.push(0);
    assert!(matches!(
        read_npy(&bytes),
        Err(NpzError::DataLength {
            found: 129,
            needed: 128,
            ..
        })
    ));
}

#[test]
fn unsupported_dtypes_are_rejected_with_reasons() {
    for (descr, needle) in [
        (">f4", "big-endian"),
        (">i8", "big-endian"),
        ("|f4", "ambiguous"),
        ("<c8", "expected one of"),
        ("<f2", "expected one of"),
        ("<U3", "expected one of"),
        ("|O", "expected one of"),
    ] {
        let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (1,), }}");
        let err = read_npy(&npy_with_header(1, &dict, &[0; 8])).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, NpzError::Dtype { .. }), "{descr}: {msg}");
        assert!(
            msg.contains(descr) && msg.contains(needle),
            "{descr}: {msg}"
        );
    }
    let dict = "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }";
    let err = read_npy(&npy_with_header(1, dict, &[0; 4])).unwrap_err();
    assert!(err.to_string().contains("structured"), "{err}");
}

#[test]
fn malformed_headers_are_errors() {
    for dict in [
        "{'descr': '<f4', 'shape': (1,), }",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': 1, }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': ('a',), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ",
        "not a dict at all",
    ] {
        let err = read_npy(&npy_with_header(1, dict, &[0; 4]));
        assert!(err.is_err(), "{dict}: {err:?}");
    }
    let bytes = npy_with_header(3, "{'descr': '<f4'", &[]);
    let mut bad_utf8 = bytes.clone();
    bad_utf8[12] = 0xff;
    assert!(read_npy(&bad_utf8).is_err());
}

#[test]
fn garbage_never_panics() {
    // A deterministic byte soup, also with a valid magic in front.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for len in 0..300 {
        let soup: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let _ = read_npy(&soup);
        let _ = read_npz(&soup);
        let mut with_magic = b"\x93NUMPY\x01\x00".to_vec();
        with_magic.extend_from_slice(&soup);
        let _ = read_npy(&with_magic);
    }
    // Flipping single bytes of a valid archive.
    let arrays: BTreeMap<String, Array> = samples()
        .into_iter()
        .enumerate()
        .map(|(i, a)| (format!("arr_{i:04}"), a))
        .collect();
    let bytes = write_npz(&arrays).unwrap();
    for i in (0..bytes.len()).step_by(7) {
        let mut damaged = bytes.clone();
        damaged[i] ^= 0x5a;
        let _ = read_npz(&damaged);
    }
}

fn numbered(arrays: Vec<Array>) -> BTreeMap<String, Array> {
    arrays
        .into_iter()
        .enumerate()
        .map(|(i, a)| (format!("arr_{i:04}"), a))
        .collect()
}

#[test]
fn npz_round_trips_and_is_deterministic() {
    let mut arrays = numbered(samples().into_iter().chain(edge_cases()).collect());
    arrays.insert(
        "meta_n_batches".into(),
        Array::I32 {
            shape: vec![1],
            data: vec![6],
        },
    );
    let bytes = write_npz(&arrays).unwrap();
    assert_eq!(read_npz(&bytes).unwrap(), arrays);
    assert_eq!(write_npz(&arrays).unwrap(), bytes);
    assert_eq!(
        read_npz(&write_npz(&BTreeMap::new()).unwrap()).unwrap(),
        BTreeMap::new()
    );
}

#[test]
fn npz_reads_deflated_members() {
    let arrays = numbered(samples());
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (key, a) in &arrays {
        writer.start_file(format!("{key}.npy"), options).unwrap();
        writer.write_all(&write_npy(a)).unwrap();
    }
    let bytes = writer.finish().unwrap().into_inner();
    assert_eq!(read_npz(&bytes).unwrap(), arrays);
}

#[test]
fn npz_member_errors_name_the_member() {
    let a = Array::F32 {
        shape: vec![8, 4],
        data: vec![0.0; 32],
    };
    let mut npy = write_npy(&a);
    npy.truncate(npy.len() - 8);
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    writer.start_file("arr_0003.npy", options).unwrap();
    writer.write_all(&npy).unwrap();
    let bytes = writer.finish().unwrap().into_inner();
    let err = read_npz(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "member `arr_0003.npy`: data is 120 bytes, shape (8, 4) float32 needs 128"
    );
}

#[test]
fn npz_rejects_non_zip_and_truncated_archives() {
    assert!(matches!(
        read_npz(b"definitely not a zip"),
        Err(NpzError::Zip(_))
    ));
    let bytes = write_npz(&numbered(samples())).unwrap();
    for cut in [0, 10, bytes.len() / 2, bytes.len() - 1] {
        assert!(read_npz(&bytes[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn write_npz_rejects_inconsistent_arrays() {
    let mut arrays = BTreeMap::new();
    arrays.insert(
        "w".to_string(),
        Array::F32 {
            shape: vec![2, 2],
            data: vec![1.0; 3],
        },
    );
    let err = write_npz(&arrays).unwrap_err();
    assert_eq!(
        err.to_string(),
        "member `w.npy`: array has 3 elements, shape (2, 2) needs 4"
    );
}

#[test]
fn read_npz_file_errors_carry_the_path() {
    // A scratch directory tempfile removes when it is dropped.
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let missing = dir.join("missing.npz");
    let err = read_npz_file(&missing).unwrap_err();
    assert!(err.to_string().contains("missing.npz"), "{err}");
    let garbage = dir.join("garbage.npz");
    std::fs::write(&garbage, b"garbage").unwrap();
    let err = read_npz_file(&garbage).unwrap_err();
    assert!(err.to_string().contains("garbage.npz"), "{err}");
    let good = dir.join("good.npz");
    let arrays = numbered(samples());
    std::fs::write(&good, write_npz(&arrays).unwrap()).unwrap();
    assert_eq!(read_npz_file(&good).unwrap(), arrays);
}
