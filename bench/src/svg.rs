//! A horizontal bar chart as a standalone SVG file (no plotting dependency).

pub fn bars(title: &str, unit: &str, rows: &[(String, f64)]) -> String {
    let max = rows.iter().map(|r| r.1).fold(0.0_f64, f64::max).max(1e-9);
    let (label_w, bar_w, row_h) = (330.0, 420.0, 24.0);
    let height = 40.0 + row_h * rows.len() as f64 + 10.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{title}</text>\n",
        w = label_w + bar_w + 120.0
    );
    for (i, (label, value)) in rows.iter().enumerate() {
        let y = 40.0 + row_h * i as f64;
        let len = bar_w * value / max;
        svg += &format!(
            "<text x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\">{label}</text>\n\
             <rect x=\"{label_w}\" y=\"{y}\" width=\"{len:.1}\" height=\"{h}\" fill=\"{color}\"/>\n\
             <text x=\"{vx:.1}\" y=\"{ty}\">{value:.1} {unit}</text>\n",
            lx = label_w - 8.0,
            ty = y + 15.0,
            h = row_h - 6.0,
            color = if label.contains("LOCK.") || label.contains("redis-lock") {
                "#c0392b"
            } else {
                "#7f8c8d"
            },
            vx = label_w + len + 6.0,
        );
    }
    svg + "</svg>\n"
}
