//! The chat outputs: Telegram, Slack and Workplace, each message as its API wants it.

use serde_json::json;

use super::*;
use crate::client::{form, query_pairs};
use crate::split::split;

impl Output {
    pub(super) async fn telegram(&self, job: &Job) -> Result<(), String> {
        let url = &job.target;
        // Limits are per chat; the bot token in the path does not matter for them.
        let chat = query_pairs(url)
            .into_iter()
            .find(|(k, _)| k == "chat_id")
            .map(|(_, v)| v)
            .unwrap_or_default();
        let quiet = self.var("DisableNotification", "false");
        let with_line = self.with_query_line(job);
        let mut text = Some(with_line.as_str());
        if let Some((png, _)) = self.image(job).await {
            let caption = if with_line.encode_utf16().count() <= TELEGRAM_CAPTION {
                text = None;
                with_line.clone()
            } else {
                // Too long for a caption: the photo carries the query line, the message
                // follows as text.
                text = Some(job.message.as_str());
                let line = self.query_line(job).unwrap_or_default();
                split(&line, TELEGRAM_CAPTION, true).swap_remove(0)
            };
            let photo_url = url.replacen("/sendMessage", "/sendPhoto", 1);
            self.pace(&chat).await;
            self.attempt("sendPhoto", || {
                let form = Multipart::new()
                    .text("caption", &caption)
                    .text("parse_mode", "HTML")
                    .text("disable_notification", &quiet)
                    .file("photo", "alert.png", "image/png", &png);
                async { self.multipart(&photo_url, form).await.and_then(check_ok) }
            })
            .await?;
        }
        if let Some(text) = text {
            for part in split(text, TELEGRAM_TEXT, true) {
                self.pace(&chat).await;
                self.attempt("sendMessage", || {
                    let form = Multipart::new()
                        .text("text", &part)
                        .text("parse_mode", "HTML")
                        .text("disable_web_page_preview", "true")
                        .text("disable_notification", &quiet);
                    async { self.multipart(url, form).await.and_then(check_ok) }
                })
                .await?;
            }
        }
        Ok(())
    }

    pub(super) async fn slack(&self, job: &Job) -> Result<(), String> {
        // `--slack-url` keeps the original's shape (`.../api/files.upload?token=T&channels=C`);
        // the token and channels come from it, the methods are the current ones.
        let q = query_pairs(&job.target);
        let find = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let token = find("token").ok_or("the Slack URL has no token parameter")?;
        let channels = find("channels")
            .or_else(|| find("channel"))
            .ok_or("the Slack URL has no channels parameter")?;
        let path = job.target.split('?').next().unwrap_or("");
        let base = path.rsplit_once('/').map(|(b, _)| b).unwrap_or(path);
        let auth = ("authorization", format!("Bearer {token}"));
        let image = self.image(job).await;
        let with_line = self.with_query_line(job);
        for channel in channels.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            if let Some((png, q)) = &image {
                let ticket = self
                    .attempt("files.getUploadURLExternal", || {
                        let body = form(&[
                            ("filename", "alert.png"),
                            ("length", &png.len().to_string()),
                        ]);
                        let headers = [
                            auth.clone(),
                            ("content-type", "application/x-www-form-urlencoded".into()),
                        ];
                        async move {
                            self.http(
                                Method::POST,
                                &format!("{base}/files.getUploadURLExternal"),
                                &headers,
                                body,
                            )
                            .await
                            .and_then(check_ok)
                        }
                    })
                    .await?
                    .json();
                let (Some(upload_url), Some(file_id)) = (
                    ticket.get("upload_url").and_then(Json::as_str),
                    ticket.get("file_id").and_then(Json::as_str),
                ) else {
                    return Err(
                        "files.getUploadURLExternal: no upload_url/file_id in the answer".into(),
                    );
                };
                self.attempt("file upload", || {
                    let headers = [("content-type", "application/octet-stream".to_string())];
                    async move {
                        self.http(Method::POST, upload_url, &headers, png.clone())
                            .await
                    }
                })
                .await?;
                let files = json!([{"id": file_id, "title": q.expr}]).to_string();
                self.attempt("files.completeUploadExternal", || {
                    let body = form(&[
                        ("files", &files),
                        ("channel_id", channel),
                        ("initial_comment", &job.message),
                    ]);
                    let headers = [
                        auth.clone(),
                        ("content-type", "application/x-www-form-urlencoded".into()),
                    ];
                    async move {
                        self.http(
                            Method::POST,
                            &format!("{base}/files.completeUploadExternal"),
                            &headers,
                            body,
                        )
                        .await
                        .and_then(check_ok)
                    }
                })
                .await?;
                continue;
            }
            // Without an image the line replaces the file title that showed the expression.
            for part in split(&with_line, SLACK_TEXT, false) {
                self.attempt("chat.postMessage", || {
                    let body = Bytes::from(json!({"channel": channel, "text": part}).to_string());
                    let headers = [
                        auth.clone(),
                        ("content-type", "application/json; charset=utf-8".into()),
                    ];
                    async move {
                        self.http(
                            Method::POST,
                            &format!("{base}/chat.postMessage"),
                            &headers,
                            body,
                        )
                        .await
                        .and_then(check_ok)
                    }
                })
                .await?;
            }
        }
        Ok(())
    }

    pub(super) async fn workchat(&self, job: &Job) -> Result<(), String> {
        let url = &job.target;
        let kind = self.var("NotificationType", "REGULAR");
        if let Some((png, _)) = self.image(job).await {
            let attachment =
                json!({"attachment": {"type": "image", "payload": {"is_reusable": true}}})
                    .to_string();
            self.attempt("image", || {
                let form = Multipart::new()
                    .text("message", &attachment)
                    .text("notification_type", &kind)
                    .file("filedata", "alert.png", "image/png", &png);
                async { self.multipart(url, form).await }
            })
            .await?;
        }
        for part in split(&self.with_query_line(job), WORKCHAT_TEXT, false) {
            // Proper JSON: the original built it with string formatting and broke on quotes.
            let message = json!({"text": part}).to_string();
            self.attempt("message", || {
                let form = Multipart::new()
                    .text("message", &message)
                    .text("notification_type", &kind);
                async { self.multipart(url, form).await }
            })
            .await?;
        }
        Ok(())
    }
}
