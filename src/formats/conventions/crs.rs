//! What the georeferenced views need to know of a coordinate reference system given as
//! WKT (1 or 2) or as an EPSG code: whether it is geographic or projected, the EPSG code
//! its root names (for GeoTIFF's GeoKeys), and a WKT 1 text for the formats that read no
//! other (ENVI), from the EPSG definitions of the `crs-definitions` crate when the WKT
//! given is WKT 2. Nothing is read from the network or a database.

/// The kinds of CRS a raster can be placed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrsKind {
    Geographic,
    Projected,
}

/// A coordinate reference system as the views write it.
#[derive(Debug, Clone, PartialEq)]
pub struct Crs {
    /// The WKT as found, when the CRS came as WKT.
    pub wkt: Option<String>,
    /// The EPSG code of the CRS itself (not of a part of it).
    pub epsg: Option<u16>,
    pub kind: CrsKind,
}

impl Crs {
    /// A CRS from WKT 1 or WKT 2: its root's keyword gives the kind, its root's
    /// `AUTHORITY` / `ID` the EPSG code.
    pub fn from_wkt(wkt: &str) -> Result<Crs, String> {
        let root = Root::parse(wkt)?;
        let kind = match root.keyword.as_str() {
            "GEOGCS" | "GEOGCRS" | "GEOGRAPHICCRS" => CrsKind::Geographic,
            // A geodetic CRS is geographic when its coordinate system is ellipsoidal.
            "GEODCRS" | "GEODETICCRS" if wkt.to_ascii_lowercase().contains("cs[ellipsoidal") => {
                CrsKind::Geographic
            }
            "PROJCS" | "PROJCRS" | "PROJECTEDCRS" => CrsKind::Projected,
            other => {
                return Err(format!(
                    "a CRS of kind {other} (only geographic and projected ones place a raster)"
                ))
            }
        };
        Ok(Crs {
            wkt: Some(wkt.trim().to_string()),
            epsg: root.epsg,
            kind,
        })
    }

    /// A CRS known only by its EPSG code, when the definitions hold it.
    pub fn from_epsg(code: u64) -> Result<Crs, String> {
        let wkt = u16::try_from(code)
            .ok()
            .and_then(crs_definitions::from_code)
            .map(|def| def.wkt)
            .ok_or_else(|| format!("EPSG:{code} is not a CRS zarrfs knows"))?;
        let mut crs = Crs::from_wkt(wkt)?;
        // The views name it by its code; the definition's WKT serves ENVI only.
        crs.wkt = None;
        crs.epsg = Some(code as u16);
        Ok(crs)
    }

    /// The CRS as GDAL's `SetFromUserInput` reads it (VRT's `SRS`): the WKT as found, or
    /// `EPSG:n`.
    pub fn user_input(&self) -> String {
        match (&self.wkt, self.epsg) {
            (Some(wkt), _) => wkt.clone(),
            (None, Some(code)) => format!("EPSG:{code}"),
            (None, None) => String::new(),
        }
    }

    /// A WKT 1 text of the CRS: the WKT as found when it is WKT 1, else the EPSG
    /// definition of its code (with the axis order of the WKT found, when the definition
    /// names no axes).
    pub fn wkt1(&self) -> Option<String> {
        if let Some(wkt) = &self.wkt {
            let keyword = Root::parse(wkt).ok()?.keyword;
            if matches!(keyword.as_str(), "GEOGCS" | "PROJCS") {
                return Some(wkt.clone());
            }
        }
        let def = crs_definitions::from_code(self.epsg?)?.wkt;
        Some(match &self.wkt {
            Some(wkt) if self.kind == CrsKind::Projected && !def.contains("AXIS[") => {
                with_axes(def, north_first(wkt))
            }
            _ => def.to_string(),
        })
    }
}

/// Whether the first axis of a WKT's own coordinate system points north (a projected
/// CRS given northing first, such as EPSG:3035).
fn north_first(wkt: &str) -> bool {
    let Some(open) = wkt.find(['[', '(']) else {
        return false;
    };
    children(&wkt[open + 1..])
        .ok()
        .and_then(|c| c.into_iter().find(|(name, _)| name == "AXIS"))
        .and_then(|(_, args)| {
            args.split(',')
                .nth(1)
                .map(|d| d.trim().eq_ignore_ascii_case("north"))
        })
        .unwrap_or(false)
}

/// A WKT 1 projected CRS with its axes named (northing first or not) before its root
/// authority: an EPSG definition without axes is read as easting first.
fn with_axes(def: &str, north_first: bool) -> String {
    let axes = if north_first {
        r#"AXIS["Northing",NORTH],AXIS["Easting",EAST]"#
    } else {
        r#"AXIS["Easting",EAST],AXIS["Northing",NORTH]"#
    };
    match def.rfind(",AUTHORITY[") {
        Some(at) => format!("{},{axes}{}", &def[..at], &def[at..]),
        None => def.to_string(),
    }
}

/// The root element of a WKT text: its keyword and the EPSG code of its own authority.
struct Root {
    keyword: String,
    epsg: Option<u16>,
}

impl Root {
    fn parse(wkt: &str) -> Result<Root, String> {
        let wkt = wkt.trim();
        let open = wkt
            .find(['[', '('])
            .ok_or_else(|| "not WKT: no bracket".to_string())?;
        let keyword = wkt[..open].trim().to_ascii_uppercase();
        if keyword.is_empty()
            || !keyword
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format!("not WKT: {:?}", truncate(wkt)));
        }
        let mut epsg = None;
        for (name, args) in children(&wkt[open + 1..])? {
            if name == "AUTHORITY" || name == "ID" {
                let parts: Vec<String> = args
                    .split(',')
                    .map(|a| a.trim().trim_matches('"').to_string())
                    .collect();
                if parts.len() >= 2 && parts[0].eq_ignore_ascii_case("EPSG") {
                    epsg = parts[1].parse::<u16>().ok();
                }
            }
        }
        Ok(Root { keyword, epsg })
    }
}

/// The keyword and the text inside the brackets of each element directly inside the
/// root (`body` starts just after the root's opening bracket).
fn children(body: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut token_start = 0usize;
    let mut open_at = 0usize;
    let mut keyword = String::new();
    for (i, c) in body.char_indices() {
        if in_string {
            if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '(' => {
                if depth == 0 {
                    keyword = body[token_start..i].trim().to_ascii_uppercase();
                    open_at = i + 1;
                }
                depth += 1;
            }
            ']' | ')' => {
                if depth == 0 {
                    // The root's own closing bracket.
                    return Ok(out);
                }
                depth -= 1;
                if depth == 0 {
                    out.push((std::mem::take(&mut keyword), body[open_at..i].to_string()));
                }
            }
            ',' if depth == 0 => token_start = i + 1,
            _ => {}
        }
    }
    Err("not WKT: unbalanced brackets".into())
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_authority_is_the_code_not_a_part_s() {
        let wkt1 = crs_definitions::from_code(32633).unwrap().wkt;
        let crs = Crs::from_wkt(wkt1).unwrap();
        assert_eq!((crs.kind, crs.epsg), (CrsKind::Projected, Some(32633)));
        assert_eq!(crs.wkt1().as_deref(), Some(wkt1));
        let wkt2 = r#"GEOGCRS["WGS 84",DATUM["World Geodetic System 1984",ELLIPSOID["WGS 84",6378137,298.257223563,LENGTHUNIT["metre",1]]],PRIMEM["Greenwich",0,ANGLEUNIT["degree",0.0174532925199433]],CS[ellipsoidal,2],AXIS["latitude",north,ORDER[1],ANGLEUNIT["degree",0.0174532925199433]],AXIS["longitude",east,ORDER[2],ANGLEUNIT["degree",0.0174532925199433]],USAGE[SCOPE["x"],AREA["World"],BBOX[-90,-180,90,180]],ID["EPSG",4326]]"#;
        let crs = Crs::from_wkt(wkt2).unwrap();
        assert_eq!((crs.kind, crs.epsg), (CrsKind::Geographic, Some(4326)));
        assert!(crs.wkt1().unwrap().starts_with("GEOGCS[\"WGS 84\""));
        // A code only on a part (the datum) is not the CRS's.
        let partial = r#"PROJCS["custom",GEOGCS["x",DATUM["d",SPHEROID["s",1,2],AUTHORITY["EPSG","6326"]]],PROJECTION["Mercator_1SP"]]"#;
        let crs = Crs::from_wkt(partial).unwrap();
        assert_eq!((crs.kind, crs.epsg), (CrsKind::Projected, None));
        assert_eq!(crs.wkt1().as_deref(), Some(partial));
        let laea = r#"PROJCRS["ETRS89 / LAEA Europe",BASEGEOGCRS["ETRS89",ID["EPSG",4258]],CONVERSION["x"],CS[Cartesian,2],AXIS["northing (Y)",north,ORDER[1]],AXIS["easting (X)",east,ORDER[2]],ID["EPSG",3035]]"#;
        let wkt1 = Crs::from_wkt(laea).unwrap().wkt1().unwrap();
        assert!(
            wkt1.ends_with(
                r#"AXIS["Northing",NORTH],AXIS["Easting",EAST],AUTHORITY["EPSG","3035"]]"#
            ),
            "{wkt1}"
        );
        assert!(Crs::from_wkt("GEOCCS[\"x\"]").is_err());
        assert!(Crs::from_wkt("PROJCS[\"x\"").is_err());
        assert!(Crs::from_wkt("EPSG:4326").is_err());
        assert_eq!(Crs::from_epsg(3035).unwrap().user_input(), "EPSG:3035");
        assert!(Crs::from_epsg(99999).is_err());
    }
}
