//! NEGOTIATE (MS-SMB2 3.3.5.3 and 3.3.5.4), including the upgrade from an
//! SMB1 NEGOTIATE.

use copyless_crypto::SigningAlgorithm;
use copyless_proto::command as cmd;
use copyless_proto::header::{Header, FLAG_SERVER_TO_REDIR};
use copyless_proto::negotiate::{self as neg, NegotiateRequest, NegotiateResponse};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{Writer, HEADER_LEN};

use crate::conn::connection::{Connection, Output, Reply, Req};
use crate::env::Env;

/// Dialects we speak, best last.
const DIALECTS: [u16; 5] = [
    neg::DIALECT_202,
    neg::DIALECT_210,
    neg::DIALECT_300,
    neg::DIALECT_302,
    neg::DIALECT_311,
];

/// 2.0.2 has no multi-credit requests, so 64 KiB is its limit.
const SMB202_MAX_IO: u32 = 65536;

impl Connection {
    pub(crate) fn negotiate(
        &mut self,
        req: &Req<'_>,
        reply: &mut Reply,
        w: &mut Writer,
        env: &mut dyn Env,
    ) -> Result<NtStatus, NtStatus> {
        if self.dialect != 0 && self.dialect != neg::DIALECT_WILDCARD {
            // A second NEGOTIATE on a connection is a protocol violation.
            reply.disconnect = true;
            return Err(status::INVALID_PARAMETER);
        }
        let nr = match NegotiateRequest::parse(req.msg) {
            Ok(n) => n,
            Err(_) => {
                reply.disconnect = true;
                return Err(status::INVALID_PARAMETER);
            }
        };
        let config = &self.server.config;
        let offered = config.min_dialect..=config.max_dialect;
        let Some(dialect) = DIALECTS
            .iter()
            .rev()
            .copied()
            .find(|d| offered.contains(d) && nr.dialects.contains(d))
        else {
            reply.disconnect = true;
            return Err(status::NOT_SUPPORTED);
        };
        let mut contexts = Vec::new();
        if dialect == neg::DIALECT_311 {
            let hashes = nr
                .context(neg::CTX_PREAUTH_INTEGRITY)
                .and_then(|c| neg::parse_preauth(c.data).ok())
                .unwrap_or_default();
            if !hashes.contains(&neg::HASH_SHA512) {
                reply.disconnect = true;
                return Err(status::INVALID_PARAMETER);
            }
            let mut salt = [0u8; 32];
            env.fill_random(&mut salt);
            contexts.push((neg::CTX_PREAUTH_INTEGRITY, neg::preauth_context(&salt)));
            self.signing_algorithm = SigningAlgorithm::AesCmac;
            if let Some(c) = nr.context(neg::CTX_SIGNING) {
                let offered = neg::parse_id_list(c.data).map_err(|_| status::INVALID_PARAMETER)?;
                // The first algorithm of the client's list that we have.
                if let Some(a) = offered.iter().find_map(|id| SigningAlgorithm::from_id(*id)) {
                    self.signing_algorithm = a;
                }
                contexts.push((
                    neg::CTX_SIGNING,
                    neg::id_list_context(&[self.signing_algorithm.id()]),
                ));
            }
        }
        self.cipher = None;
        if dialect == neg::DIALECT_311 {
            if let Some(c) = nr.context(neg::CTX_ENCRYPTION) {
                let offered = neg::parse_id_list(c.data).map_err(|_| status::INVALID_PARAMETER)?;
                self.cipher = crate::conn::encryption::PREFERENCE
                    .iter()
                    .copied()
                    .find(|c| offered.contains(&c.id()));
                // No common cipher is answered with cipher 0.
                let chosen = self.cipher.map(|c| c.id()).unwrap_or(0);
                contexts.push((neg::CTX_ENCRYPTION, neg::id_list_context(&[chosen])));
            }
        } else if dialect >= neg::DIALECT_300 && nr.capabilities & neg::CAP_ENCRYPTION != 0 {
            self.cipher = Some(copyless_crypto::CipherId::Aes128Ccm);
        }
        self.dialect = dialect;
        self.client_guid = nr.client_guid;
        self.server.clients.join(self.client_guid, self.id());
        self.client_security_mode = nr.security_mode;
        self.client_capabilities = nr.capabilities;
        self.client_dialects = nr.dialects.clone();
        self.server_security_mode = self.security_mode();
        self.server_capabilities = if dialect >= neg::DIALECT_210 {
            neg::CAP_LARGE_MTU | neg::CAP_LEASING
        } else {
            0
        };
        // Multichannel and directory leasing only for a client that asks
        // (MS-SMB2 3.3.5.4), as Windows and Samba do: a client told of
        // them unasked may use them wrongly.
        let asked = |cap: u32| dialect >= neg::DIALECT_300 && nr.capabilities & cap != 0;
        if asked(neg::CAP_MULTI_CHANNEL) && self.server.config.multichannel {
            self.server_capabilities |= neg::CAP_MULTI_CHANNEL;
        }
        if asked(neg::CAP_DIRECTORY_LEASING) && self.server.sees_local_changes() {
            self.server_capabilities |= neg::CAP_DIRECTORY_LEASING;
        }
        if dialect != neg::DIALECT_311 && self.cipher.is_some() {
            self.server_capabilities |= neg::CAP_ENCRYPTION;
        }
        self.max_io = if dialect >= neg::DIALECT_210 {
            self.made_with.max_io_size
        } else {
            SMB202_MAX_IO
        };
        if dialect == neg::DIALECT_311 {
            self.preauth.update(req.msg);
            reply.preauth_connection = true;
        }
        let hint = copyless_auth::negotiate_hint(self.server.config.kerberos.is_some());
        let resp = NegotiateResponse {
            security_mode: self.server_security_mode,
            dialect,
            server_guid: self.server.config.server_guid,
            capabilities: self.server_capabilities,
            max_transact_size: self.max_io,
            max_read_size: self.max_io,
            max_write_size: self.max_io,
            system_time: env.now(),
            server_start_time: 0,
            security_buffer: &hint,
            contexts,
        };
        resp.write(w);
        Ok(status::SUCCESS)
    }

    fn security_mode(&self) -> u16 {
        if self.server.config.signing_required {
            neg::SIGNING_ENABLED | neg::SIGNING_REQUIRED
        } else {
            neg::SIGNING_ENABLED
        }
    }

    /// Answers an SMB1 NEGOTIATE that offers SMB2 with an SMB2 NEGOTIATE
    /// response (MS-SMB2 3.3.5.3.1).
    pub(crate) fn smb1_upgrade(&mut self, wildcard: bool, env: &mut dyn Env) -> Output {
        let dialect = if wildcard {
            neg::DIALECT_WILDCARD
        } else {
            neg::DIALECT_202
        };
        self.credits.consume(0, 1);
        let granted = self.credits.grant(1);
        self.credits.release(u64::from(granted));
        self.dialect = dialect;
        self.server_security_mode = self.security_mode();
        self.max_io = SMB202_MAX_IO;
        let mut w = Writer::new();
        Header {
            command: cmd::NEGOTIATE,
            credits: granted,
            flags: FLAG_SERVER_TO_REDIR,
            ..Header::default()
        }
        .write(&mut w.buf);
        debug_assert_eq!(w.len(), HEADER_LEN);
        let hint = copyless_auth::negotiate_hint(self.server.config.kerberos.is_some());
        NegotiateResponse {
            security_mode: self.server_security_mode,
            dialect,
            server_guid: self.server.config.server_guid,
            capabilities: 0,
            max_transact_size: SMB202_MAX_IO,
            max_read_size: SMB202_MAX_IO,
            max_write_size: SMB202_MAX_IO,
            system_time: env.now(),
            server_start_time: 0,
            security_buffer: &hint,
            contexts: Vec::new(),
        }
        .write(&mut w);
        Output {
            frames: vec![w.into_vec()],
            ..Output::default()
        }
    }
}
